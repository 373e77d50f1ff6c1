// Every public declaration of dsv4cpu: the version, errors, views, options and the registry, the
// numerics helpers, the cache sizes, and the ops of every area.
#pragma once

#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/cache_sizes.hpp"
#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/metadata.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"
#include "dsv4cpu/version.hpp"
