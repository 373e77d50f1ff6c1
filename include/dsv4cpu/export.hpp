// Symbol visibility: the library is built with hidden visibility, and only what is marked
// DSV4CPU_API is exported from the shared library.
#pragma once

#define DSV4CPU_API __attribute__((visibility("default")))
