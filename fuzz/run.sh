#!/usr/bin/env bash
# Runs the cargo-fuzz targets (issue #12), one after the other, one job each, and prints
# one line per target: executions, time, executions per second, crashes (new files in
# fuzz/artifacts/TARGET/). Exits 1 if any target crashed.
#
#   fuzz/run.sh PIPELINE_RUNS OTHER_RUNS [TARGET...]
#
# FUZZ_SANITIZER: `none` (default: the crate forbids unsafe code, so the fuzzers hunt
# panics and broken invariants, and ASan would halve the rate) or `address`.
# FUZZ_MAX_TIME: seconds per target at most (default: no limit). Needs `cargo +nightly`
# and cargo-fuzz. Logs: fuzz/logs/TARGET.log (ignored by git).
#
# The committed corpus (fuzz/corpus/TARGET) is only read: new inputs go to a scratch
# directory first in libFuzzer's list, removed at exit, so a run leaves the work tree as
# it found it. FUZZ_KEEP=DIR keeps them in DIR/TARGET instead (relative to fuzz/); `make fuzz`
# sets FUZZ_KEEP=corpus, so a long run grows the corpus that `make fuzz-cmin` minimises.
set -euo pipefail
cd "$(dirname "$0")"

pipeline_runs=${1:?usage: fuzz/run.sh PIPELINE_RUNS OTHER_RUNS [TARGET...]}
other_runs=${2:?usage: fuzz/run.sh PIPELINE_RUNS OTHER_RUNS [TARGET...]}
shift 2
targets=("$@")
((${#targets[@]})) || targets=(pipeline policy known_hosts ssh_command url_path redactor coding escape upstream_wire)
san=${FUZZ_SANITIZER:-none}
max_time=${FUZZ_MAX_TIME:-0}

[ -d corpus/pipeline ] || ./seed.sh
cargo +nightly fuzz build -s "$san"
mkdir -p logs

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
keep=${FUZZ_KEEP:-$scratch}

failed=0
summary=()
for t in "${targets[@]}"; do
    runs=$other_runs
    extra=()
    if [ "$t" = pipeline ]; then
        runs=$pipeline_runs
        # Inputs longer than a few lines add nothing the corpus does not reach; leaks are
        # not hunted (`-s none`, and the crate forbids unsafe code).
        extra=(-max_len=4096 -detect_leaks=0)
    fi
    mkdir -p "artifacts/$t" "corpus/$t" "$keep/$t"
    before=$(find "artifacts/$t" -type f | wc -l)
    t0=$(date +%s.%N)
    set +e
    dirs=("$keep/$t" "corpus/$t")
    [ "$keep" != corpus ] || dirs=("corpus/$t")
    cargo +nightly fuzz run -s "$san" "$t" "${dirs[@]}" -- -runs="$runs" -max_total_time="$max_time" -timeout=10 \
        -print_final_stats=1 "${extra[@]}" >"logs/$t.log" 2>&1
    status=$?
    set -e
    t1=$(date +%s.%N)
    crashes=$(($(find "artifacts/$t" -type f | wc -l) - before))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -n 1)
    [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "logs/$t.log" | tail -n 1 | tr -d '#')
    execs=${execs:-0}
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    rate=$(awk -v n="$execs" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b > a ? n / (b - a) : n) }')
    line="fuzz $t: $execs executions in $secs s ($rate exec/s), $crashes crashes"
    if ((status != 0 || crashes > 0)); then
        failed=1
        line="$line; see fuzz/logs/$t.log and fuzz/artifacts/$t/"
    fi
    echo "$line"
    summary+=("$line")
done
echo "== fuzz summary ($(uname -m), $(nproc) cores, sanitizer $san)"
printf '%s\n' "${summary[@]}"
exit "$failed"
