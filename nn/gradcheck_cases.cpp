// The nn gradient-check table, assembled from one family of rows per file.
#include "nn/gradcheck_cases.h"

namespace linea::nn {

std::vector<gradcheck::Case> module_cases() {
  std::vector<gradcheck::Case> cases;
  add_layer_cases(cases);
  add_scan_cases(cases);
  add_attention_cases(cases);
  add_linear_attention_cases(cases);
  add_recurrent_cases(cases);
  add_model_cases(cases);
  // Further families (attention, linear attention, recurrent, pooling) are appended here, each
  // declared in nn/gradcheck_cases.h and defined in its own nn/gradcheck_cases_<family>.cpp.
  return cases;
}

}  // namespace linea::nn
