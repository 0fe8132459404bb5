#include "tests/test_util.h"

#include "cuda/memory.h"

namespace linea::testing {

bool cuda_available() { return cuda::is_available(); }

}  // namespace linea::testing
