// llama.cpp's own llama-quantize, called through libllama (dlopen), for
// tools/llama_quantize_check.py to compare gpumem quantize's output with.
// Only nthread, ftype and (with a fifth argument "pure") pure of
// llama_model_quantize_params are set; the rest keep
// llama_model_quantize_default_params()'s values, in a buffer larger than
// any version's struct. pure is the byte at offset 19: after four 4-byte
// fields (nthread, ftype, output_tensor_type, token_embedding_type) and three
// bools (allow_requantize, quantize_output_tensor, only_copy), as llama.h
// has it since pure was added.
//   cc -O1 -o /tmp/llama_quantize tools/llama_quantize.c -ldl
//   /tmp/llama_quantize LIBLLAMA.so IN.gguf OUT.gguf FTYPE [pure]
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef struct { int32_t nthread; int32_t ftype; unsigned char rest[1024]; } params_t;
int main(int argc, char** argv) {
  if (argc != 5 && !(argc == 6 && strcmp(argv[5], "pure") == 0)) {
    fprintf(stderr, "lq LIB IN OUT FTYPE [pure]\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  void (*backend_init)(void) = (void (*)(void))dlsym(lib, "llama_backend_init");
  params_t (*defaults)(void) = (params_t (*)(void))dlsym(lib, "llama_model_quantize_default_params");
  uint32_t (*quantize)(const char*, const char*, const params_t*) =
      (uint32_t (*)(const char*, const char*, const params_t*))dlsym(lib, "llama_model_quantize");
  if (!defaults || !quantize) { fprintf(stderr, "symbols missing\n"); return 1; }
  if (backend_init) backend_init();
  params_t p = defaults();
  p.nthread = 1;
  p.ftype = atoi(argv[4]);
  if (argc == 6) p.rest[19 - 8] = 1;
  uint32_t rc = quantize(argv[2], argv[3], &p);
  fprintf(stderr, "rc=%u\n", rc);
  return rc;
}
