// The logistic sigmoid: the models' scores (calibration, OOS, complexity) map a linear sum to
// a probability through it. One definition, so unity batches see no two file-local copies.
#pragma once

#include <cmath>

namespace hengshi {

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace hengshi
