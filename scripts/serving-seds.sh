# Sourced by scripts/queued-patches.sh and scripts/row-order-probe.sh: sed
# expressions that make every serving prefill row read the same bytes at
# the same offsets. linear_sed puts the bench's pages in order (a paged
# cache then has the dense row's layout; bench/row_setup.h), cap_sed gives
# the seqused_k cache room for exactly 16384 keys (bench/serving_bench.cpp).
# For tile-sweep.sh variants ("FILE:EXPR") and sed -i alike.
# shellcheck shell=bash disable=SC2034  # used by the scripts that source it
linear_sed='s/int64_t i = n - 1; i > 0/int64_t i = 0; i > 0/'
cap_sed='s/kServingCapacity = 20480;/kServingCapacity = 16384;/'
