#include "kernels/cuda/internal/cublas_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace envforge::kernels::cuda::internal {
namespace {

#define ENVFORGE_STRINGIFY_INNER(x) #x
#define ENVFORGE_STRINGIFY(x) ENVFORGE_STRINGIFY_INNER(x)  // expands cublas_v2.h's _v2 macros first

#if ENVFORGE_CUDA_EMULATION

Result<CublasLibrary> Load() {
  CublasLibrary library;
#define ENVFORGE_CUBLAS_BIND(name) library.name = &::name;
  ENVFORGE_CUBLAS_FUNCTIONS(ENVFORGE_CUBLAS_BIND)
  ENVFORGE_CUBLASLT_FUNCTIONS(ENVFORGE_CUBLAS_BIND)
#undef ENVFORGE_CUBLAS_BIND
  return library;
}

#else

Result<void*> Open(const std::string& base) {
  std::string tried;
  for (const std::string& path : {base, std::string(ENVFORGE_CUDA_LIBRARY_DIR) + "/" + base}) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(error != nullptr ? error : path);
  }
  return UnavailableError("cannot load " + base + " (cuBLAS, needed for the GPU engine): " + tried);
}

template <typename Fn>
Status Resolve(void* handle, const char* symbol, const std::string& library, Fn* out) {
  dlerror();
  void* address = dlsym(handle, symbol);
  if (address == nullptr) return UnavailableError(library + " has no symbol " + symbol);
  *out = reinterpret_cast<Fn>(address);
  return Status();
}

Result<CublasLibrary> Load() {
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  const std::string blas_name = "libcublas.so." + major, lt_name = "libcublasLt.so." + major;
  // cuBLAS itself needs cuBLASLt: open that first so the same copy serves both.
  ENVFORGE_ASSIGN_OR_RETURN(void* lt, Open(lt_name));
  ENVFORGE_ASSIGN_OR_RETURN(void* blas, Open(blas_name));
  CublasLibrary library;
#define ENVFORGE_CUBLAS_RESOLVE(name) \
  ENVFORGE_RETURN_IF_ERROR(Resolve(blas, ENVFORGE_STRINGIFY(name), blas_name, &library.name));
#define ENVFORGE_CUBLASLT_RESOLVE(name) \
  ENVFORGE_RETURN_IF_ERROR(Resolve(lt, ENVFORGE_STRINGIFY(name), lt_name, &library.name));
  ENVFORGE_CUBLAS_FUNCTIONS(ENVFORGE_CUBLAS_RESOLVE)
  ENVFORGE_CUBLASLT_FUNCTIONS(ENVFORGE_CUBLASLT_RESOLVE)
#undef ENVFORGE_CUBLAS_RESOLVE
#undef ENVFORGE_CUBLASLT_RESOLVE
  return library;  // the handles stay open for the process's lifetime
}

#endif

}  // namespace

Result<const CublasLibrary*> Cublas() {
  static std::once_flag once;
  static Result<CublasLibrary>* loaded = nullptr;
  std::call_once(once, [] { loaded = new Result<CublasLibrary>(Load()); });  // process-wide, never freed
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

}  // namespace envforge::kernels::cuda::internal
