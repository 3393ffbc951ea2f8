#!/usr/bin/env bash
# Interleaved A/B of flash_bench binaries already built, so a device call
# spends its time measuring, not compiling: more rounds on the builds an
# earlier call left on the same warm machine (scripts/tile-sweep.sh's
# /tmp/variant-NAME/build/bench/flash_bench stay while the machine is
# held). Built here instead, they do not travel: a flash_bench of two head
# dims is about 87 MB, over what `run` carries, and links this machine's
# libbenchmark.
#
#   scripts/prebuilt-ab.sh base=/tmp/variant-base/build/bench/flash_bench new=/tmp/variant-new/build/bench/flash_bench
#
# Each round runs every binary once with BENCH_ARGS (default: the serving
# prefill rows), in the order given, then in the reverse order the next
# round (a b, b a, a b, ...), so drift within a round falls on both. Stops
# starting rounds after DEADLINE seconds (default 240). Logs go to $OUT
# (b-NAME-ROUND.log); the last thing printed is one line per row of the
# table TABLE names (default "| head_dim | cache") with each binary's
# column COL (default ms) over the rounds, and the change of each binary's
# sum against the first's (positive: faster, for times).
set -uo pipefail
OUT=${OUT:-$PWD/prebuilt-ab-out}
mkdir -p "$OUT"
BENCH_ARGS=${BENCH_ARGS:---no-standard --serving --benchmark_filter=serving/prefill/}
ROUNDS=${ROUNDS:-3}
DEADLINE=${DEADLINE:-240}
names=()
declare -A bins=()
for spec in "$@"; do
  name=${spec%%=*}
  bins[$name]=${spec#*=}
  [[ -x ${bins[$name]} ]] || { echo "$name: ${bins[$name]} is not an executable"; exit 2; }
  names+=("$name")
done
[[ ${#names[@]} -ge 1 ]] || { sed -n '2,18p' "$0"; exit 2; }
t0=$(date +%s)
done_rounds=0
for round in $(seq "$ROUNDS"); do
  (( $(date +%s) - t0 > DEADLINE )) && { echo "deadline: $done_rounds rounds"; break; }
  order=("${names[@]}")
  if (( round % 2 == 0 )); then
    order=()
    for (( k = ${#names[@]} - 1; k >= 0; k-- )); do order+=("${names[$k]}"); done
  fi
  for name in "${order[@]}"; do
    # shellcheck disable=SC2086  # the argument list splits on spaces
    timeout "${BENCH_TIMEOUT:-120}" "${bins[$name]}" $BENCH_ARGS >"$OUT/b-$name-$round.log" 2>&1 ||
      echo "$name round $round: rc $?"
  done
  done_rounds=$round
  echo "round $round: ${order[*]} ($(( $(date +%s) - t0 )) s)"
done
python3 - "$OUT" "${TABLE:-| head_dim | cache}" "${COL:-ms}" "$done_rounds" "${names[@]}" <<'EOF'
import sys
out, table, col, rounds, names = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]

def load(path):
    rows, header, on = {}, None, False
    for line in open(path, errors="replace"):
        if line.startswith(table):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
            on = True
            continue
        if not on:
            continue
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(cells[0]) <= set("-"):
            continue
        key = " ".join(cells[:2])
        try:
            rows[key] = float(cells[header.index(col)])
        except (ValueError, IndexError):
            pass
    return rows

runs = {n: [load(f"{out}/b-{n}-{r}.log") for r in range(1, rounds + 1)] for n in names}
keys = list(runs[names[0]][0]) if rounds else []
for key in keys:
    parts, sums = [], {}
    for n in names:
        vals = [r.get(key) for r in runs[n]]
        if None in vals:
            parts.append(f"{n} -")
            continue
        sums[n] = sum(vals)
        parts.append(f"{n} " + " ".join(f"{v:g}" for v in vals))
    base = sums.get(names[0])
    change = " ".join(f"{n} {base / s - 1:+.1%}" for n, s in sums.items() if n != names[0] and base)
    print(f"{key:24s} | " + " | ".join(parts) + (f" | {change}" if change else ""))
EOF
