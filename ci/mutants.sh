#!/usr/bin/env bash
# Mutation testing: each patch of ci/mutants/ plants one plausible bug in an optimized variant (or a
# validation scan, or the comparison contracts of testing/). For every patch (or those whose file
# name contains one of the PATTERNs) this script applies it to a scratch copy of the tree, rebuilds
# what the patch touches (ninja, the test binaries of the patch's family and dsv4cpu-verify), runs
# that family's unit and property tests and the conformance fixtures with --impl all, records the
# mutant as killed (a check failed) or survived, and restores the file. It prints one line per
# mutant, a table per family and `N killed, N survived`; it exits non-zero when a mutant survives,
# a patch no longer applies or a mutant does not build.
#
#   ci/mutants.sh [PATTERN...]   e.g. ci/mutants.sh logits, ci/mutants.sh 17- 76-
#
# The scratch tree is build/mutants/src (synchronised by content, so that only changed files are
# rebuilt), its build build/mutants/build (Release, every Highway target, tests on, benchmarks
# off, warnings not errors); the log of each mutant is build/mutants/logs/<patch>.log. JOBS
# (default 2) parallel build and test jobs; ccache when present. The unmutated checks of a family
# run once per content of the tree. Not part of ci/test.sh: about 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
patterns=("$@")
jobs="${JOBS:-2}"
scratch=$root/build/mutants
src=$scratch/src bld=$scratch/build logs=$scratch/logs
mkdir -p "$src" "$bld" "$logs"

# The test binaries each family's checks live in (ctest runs their tests, the sweep excepted).
family_targets() {
  case "$1" in
    compressor) echo prop_compressor test_compressor_store test_compressor_save_partial_states \
                     test_map_local_to_global_slots test_layer_step ;;
    q_rope_quant) echo prop_q_rope_quant test_indexer_q_rope_quant ;;
    logits) echo prop_indexer_logits test_indexer_logits test_indexer_topk test_amx_indexer \
                 test_avx512_pieces ;;
    topk) echo prop_topk_transform test_topk_transform test_indexer_topk ;;
    metadata) echo prop_metadata test_metadata_examples test_metadata_random \
                   test_map_local_to_global_slots ;;
    attention) echo prop_attention prop_attention_decode_hwy test_attention_sparse test_amx_attention \
                    test_inverse_gptj_rope_o_proj ;;
    insert) echo prop_attention test_attention_insert ;;
    numerics) echo prop_numerics_hwy test_numerics_fma ;;
    checks) echo test_check_scans prop_check_scans test_hostile_inputs test_compressor_bad_input \
                 test_call_allocations \
                 test_overlap test_indexer_bad_input test_metadata_bad_input \
                 test_attention_bad_input ;;
    checker) echo test_checker test_contracts test_oracle ;;
    *) return 1 ;;
  esac
}

# Synchronise the scratch tree with the working tree by content: a file is copied (with a new
# modification time) only when it differs, so ninja rebuilds exactly what changed since the last
# run, including files a previous run restored after a mutant.
# A copied file invalidates the record of the families whose unmutated checks passed.
sync_tree() {
  (git ls-files -z --cached --others --exclude-standard) | while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue
    if ! cmp -s "$f" "$src/$f" 2>/dev/null; then
      mkdir -p "$src/$(dirname "$f")"
      cp "$f" "$src/$f"
      rm -f "$passed"
    fi
  done
}

# ccache, when present: restoring a mutated file recompiles the original, which it then finds.
launcher=()
command -v ccache > /dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
passed=$scratch/baseline-passed  # the families whose unmutated checks passed on this tree

echo "== sync build/mutants/src and configure"
sync_tree
cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSV4CPU_ALL_TARGETS=ON \
  "${launcher[@]}" \
  -DDSV4CPU_WERROR=OFF -DDSV4CPU_BUILD_BENCH=OFF \
  -DDSV4CPU_SHARED_CONFORMANCE="$root/../shared/conformance" \
  -DDSV4CPU_SHARED_CONFORMANCE_ATTENTION="$root/../shared/conformance-attention" \
  -DDSV4CPU_SHARED_CONFORMANCE_NEXT="$root/../shared/conformance-next" > /dev/null

patches=()
for p in ci/mutants/*.patch; do
  [ "${#patterns[@]}" -eq 0 ] && patches+=("$p")
  for pattern in "${patterns[@]}"; do
    if [[ "$(basename "$p")" == *"$pattern"* ]]; then patches+=("$p"); break; fi
  done
done
[ "${#patches[@]}" -gt 0 ] || { echo "no patch matches '$*'"; exit 1; }

families=()
for p in "${patches[@]}"; do
  f=$(sed -n 's/^# family: *//p' "$p")
  family_targets "$f" > /dev/null || { echo "$p: unknown family '$f'"; exit 1; }
  [[ " ${families[*]} " == *" $f "* ]] || families+=("$f")
done
targets="dsv4cpu-verify"
for f in "${families[@]}"; do targets="$targets $(family_targets "$f")"; done
echo "== build the unmutated tree ($(echo $targets | wc -w) targets) and check it passes"
# shellcheck disable=SC2086
cmake --build "$bld" -j "$jobs" --target $targets > "$logs/baseline.log" 2>&1 ||
  { tail -20 "$logs/baseline.log"; echo "the unmutated tree does not build"; exit 1; }

# The ctest name filter of a family: every test of its binaries by full name (binaries of other
# families may hold an earlier mutant, and suites are shared between binaries), and the
# conformance runs. Computed once per family.
declare -A regex_of
family_regex() {
  if [ -z "${regex_of[$1]:-}" ]; then
    local names="conformance\.embedded conformance\.shared\.all conformance\.shared_attention\.all"
    names="$names conformance\.shared_next\.all"
    for t in $(family_targets "$1"); do
      local exe
      exe=$(find "$bld" -type f -name "$t" -perm -u+x | head -1)
      names="$names $("$exe" --gtest_list_tests |
        awk '/^[^ ]/ {suite = $1} /^  / {name = $1; sub(/\/.*/, "", name); print suite name}' |
        sed 's/[.+]/\\&/g')"
    done
    # A test registered per run goes on with /<op>/<variant>/<target>/<threads>, a value-
    # parameterized one with "  # GetParam() = <value>"; the names without them keep the
    # expression within what ctest compiles.
    regex_of[$1]="^($(echo $names | tr ' ' '\n' | sort -u | paste -sd '|'))(/[^ ]*)?( +#.*)?\$"
  fi
  echo "${regex_of[$1]}"
}

# Runs a family's checks; RC_PARAMS without shrinking, so a failing property stops at once.
run_checks() {
  RC_PARAMS="noshrink=1" ctest --test-dir "$bld" -R "$(family_regex "$1")" -LE sweep \
    -j "$jobs" --timeout 600 --stop-on-failure --output-on-failure --no-tests=error
}

# Restores the files of the mutant being run, also when the script is interrupted.
restore=()
restore_files() {
  for f in "${restore[@]}"; do cp "$scratch/$(echo "$f" | tr / _).orig" "$src/$f"; done
  restore=()
}
trap restore_files EXIT

# The unmutated checks of each family, unless they passed on this very tree in an earlier run.
for f in "${families[@]}"; do
  family_regex "$f" > /dev/null
  if grep -qx "$f" "$passed" 2>/dev/null; then
    echo "== baseline: $f (passed on this tree before)"
    continue
  fi
  echo "== baseline: $f"
  run_checks "$f" > "$logs/baseline-$f.log" 2>&1 ||
    { tail -30 "$logs/baseline-$f.log"; echo "the unmutated tree fails the $f checks"; exit 1; }
  echo "$f" >> "$passed"
done

killed=0 survived=0 broken=0
declare -A fam_killed fam_total
printf '%-48s %-12s %-9s %6s  %s\n' mutant family result secs "first failing check"
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  family=$(sed -n 's/^# family: *//p' "$p")
  log=$logs/$name.log
  start=$SECONDS
  files=$(sed -n 's|^+++ b/||p' "$p")
  result=killed
  why=""
  if ! patch -d "$src" -p1 --fuzz=0 --dry-run -s -f < "$p" > "$log" 2>&1; then
    result=stale
    why="patch no longer applies"
  else
    for f in $files; do cp "$src/$f" "$scratch/$(echo "$f" | tr / _).orig"; done
    restore=($files)
    patch -d "$src" -p1 --fuzz=0 -s -f < "$p" >> "$log" 2>&1
    # shellcheck disable=SC2046
    if ! cmake --build "$bld" -j "$jobs" --target dsv4cpu-verify $(family_targets "$family") \
         >> "$log" 2>&1; then
      result=broken
      why="does not build"
    elif run_checks "$family" >> "$log" 2>&1; then
      result=SURVIVED
    else
      why=$(sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*\*\*\*.*/\1/p' "$log" | head -1)
      [ -n "$why" ] || why=$(grep -m1 -o 'The following tests FAILED' "$log" || echo "ctest failed")
    fi
    restore_files
  fi
  secs=$((SECONDS - start))
  fam_total[$family]=$(( ${fam_total[$family]:-0} + 1 ))
  case $result in
    killed) killed=$((killed + 1)); fam_killed[$family]=$(( ${fam_killed[$family]:-0} + 1 )) ;;
    SURVIVED) survived=$((survived + 1)) ;;
    *) broken=$((broken + 1)) ;;
  esac
  printf '%-48s %-12s %-9s %6d  %s\n' "$name" "$family" "$result" "$secs" "$why"
done

echo
printf '%-14s %7s %7s\n' family killed total
for f in "${families[@]}"; do
  printf '%-14s %7d %7d\n' "$f" "${fam_killed[$f]:-0}" "${fam_total[$f]}"
done
echo
echo "$killed killed, $survived survived$([ "$broken" -gt 0 ] && echo ", $broken stale or broken")"
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
