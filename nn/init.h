#pragma once
// Initialisers. Each fills a tensor in place (outside autograd) from a generator, so a model's
// initial weights are fixed by its seed.
#include "autograd/ops.h"

namespace linea::nn::init {

void normal_(Tensor& t, double mean, double stddev, Generator& gen);
void uniform_(Tensor& t, double low, double high, Generator& gen);
void zeros_(Tensor& t);
void ones_(Tensor& t);
void constant_(Tensor& t, double value);

// fan_in/fan_out of a (out, in) weight, or (out, in, k...) for convolutions.
std::pair<int64_t, int64_t> fans(const Tensor& t);

// Glorot & Bengio: keeps activation variance across layers; gain scales the bound.
void xavier_uniform_(Tensor& t, Generator& gen, double gain = 1.0);
void xavier_normal_(Tensor& t, Generator& gen, double gain = 1.0);
// LeCun: variance 1 / fan_in.
void lecun_normal_(Tensor& t, Generator& gen);
void lecun_uniform_(Tensor& t, Generator& gen);
// GLA's small gate init: Xavier uniform with gain 2^-2.5, so gates start near their bias and
// decay slowly and evenly.
void gate_init_(Tensor& t, Generator& gen);

}  // namespace linea::nn::init
