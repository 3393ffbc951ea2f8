// Kernel arguments of the sm90 forward kernel: the common parameters plus
// the four TMA tensor maps, built on the host for each call.
#pragma once

#include <cuda.h>

#include "../params.h"

namespace flash::sm90 {

struct FwdParams {
  CUtensorMap tma_q;  // Q as (head_dim, seqlen_q, heads_q, batch), box (64, 64): one warpgroup's rows.
  CUtensorMap tma_k;  // K as (head_dim, seqlen_k, heads_kv, batch), box (64, kBlockN).
  CUtensorMap tma_v;  // V as (head_dim_v, seqlen_k, heads_kv, batch), box (64, kBlockN).
  CUtensorMap tma_o;  // O as (head_dim_v, seqlen_q, heads_q, batch), box (64, 64): one consumer warpgroup's rows.
  // Boxes past a map's width (a narrower call on a wider kernel) read as
  // zeros and are never stored.
  // A paged cache's K and V are (head_dim or head_dim_v, page_size, heads_kv, num_pages)
  // instead, with boxes of kv_box_rows rows (paged_box_rows, tma_limits.h);
  // otherwise kv_box_rows is kBlockN.
  int kv_box_rows;
  // A paged cache gathers_pages picks (tma_limits.h: a page_size that is not
  // a multiple of 8, or small boxes at head dim 256): the producer
  // warpgroup gathers K/V rows with cp.async (GatherProducer) and the
  // tensor maps of K and V are unused.
  int gather_kv;
  detail::FwdParams common;
};

}  // namespace flash::sm90
