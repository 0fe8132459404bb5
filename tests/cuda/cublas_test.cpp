// cuBLAS is opened at the first product, not linked (cuda/cublas.h): the versioned library with
// every function linea calls, and a clear error when a library is missing or is not cuBLAS. None
// of this needs a GPU, only a build with CUDA; built without it there is nothing to open.
#include "tests/test_util.h"

#ifdef LINEA_WITH_CUDA
#include "cuda/cublas.h"
#endif

namespace linea {
namespace {

#ifdef LINEA_WITH_CUDA

TEST(Cublas, OpensTheVersionedLibraryWithEveryFunction) {
  const cuda::Cublas& api = cuda::cublas();
  EXPECT_NE(api.create, nullptr);
  EXPECT_NE(api.set_stream, nullptr);
  EXPECT_NE(api.set_math_mode, nullptr);
  EXPECT_NE(api.gemm_strided_batched, nullptr);
  EXPECT_NE(api.sgeam, nullptr);
  ASSERT_NE(api.status_string, nullptr);
  // A call into the library, which needs no device: it is cuBLAS, and the right entry point.
  EXPECT_STREQ(api.status_string(CUBLAS_STATUS_NOT_INITIALIZED), "the library was not initialized");
  EXPECT_EQ(&cuda::cublas(), &api) << "opened once";
}

TEST(Cublas, AMissingLibraryIsAnErrorNamingEveryPlaceTried) {
  EXPECT_LINEA_ERROR(cuda::open_cublas({"libcublas_absent.so.0", "/nonexistent/folder/libcublas.so.13"}),
                     "cannot load cuBLAS", "libcublas_absent.so.0", "/nonexistent/folder/libcublas.so.13",
                     "LD_LIBRARY_PATH");
}

TEST(Cublas, ALibraryThatIsNotCublasNamesTheMissingFunction) {
  EXPECT_LINEA_ERROR(cuda::open_cublas({"libm.so.6"}), "libm.so.6 has no cublasCreate_v2", "not cuBLAS");
}

#endif  // without CUDA there is no cuBLAS to open, and no test

}  // namespace
}  // namespace linea
