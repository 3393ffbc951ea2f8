#include "schedule.h"

namespace flash::cp::detail {

std::vector<Part> parts_of_step(int rank, int world, int step, bool causal) {
  if (!causal) return {{0, 2, false}, {1, 2, false}};
  const int source = source_of_step(rank, world, step);
  if (source == rank) return {{0, 1, true}, {1, 2, true}};
  if (source < rank) return {{0, 1, false}, {1, 1, false}};
  return {{1, 2, false}};
}

}  // namespace flash::cp::detail
