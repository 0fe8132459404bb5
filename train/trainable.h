#pragma once
// Which parameters a run trains. LoRA fine-tuning trains the adapters only, attention transfer
// the new layers' own parameters only (train/linearize.h); everything else is frozen.
//
// A frozen parameter gets requires_grad off, so backward computes no gradient for it (and spends
// no time on one), and it is left out of the optimizer: no update, no weight decay, no state in
// the checkpoint. Module::to keeps requires_grad, so freezing may come before moving the model.
#include <functional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace linea::train {

// Freezes every parameter of model whose name `trainable` rejects (and unfreezes the others);
// returns the trainable ones, in named_parameters() order. An Error when none is trainable.
std::vector<nn::NamedParameter> freeze_all_but(const nn::Module& model,
                                               const std::function<bool(const std::string& name)>& trainable,
                                               const char* what);

}  // namespace linea::train
