#include "train/trainable.h"

namespace linea::train {

std::vector<nn::NamedParameter> freeze_all_but(const nn::Module& model,
                                               const std::function<bool(const std::string& name)>& trainable,
                                               const char* what) {
  std::vector<nn::NamedParameter> kept;
  for (nn::NamedParameter& p : model.named_parameters()) {
    const bool train = trainable(p.name);
    p.tensor.set_grad(Tensor());
    p.tensor.requires_grad_(train);
    if (train) kept.push_back(p);
  }
  LINEA_CHECK(!kept.empty(), what, "no parameter of the model is trainable");
  return kept;
}

}  // namespace linea::train
