/* Creates one llama.cpp context with n_ubatch apart from n_batch, which
 * node-llama-cpp's JS API cannot (it sets n_ubatch = n_batch), and prints
 * llama.cpp's log lines about buffers and batch sizes: the check that the
 * compute buffer depends on n_ubatch, not n_batch (tests/data/llm/README.md).
 *
 * Built against the llama.cpp that node-llama-cpp 3.21.1 ships (its source
 * is the git bundle in the package, its binaries in @node-llama-cpp/linux-x64):
 *   N=/work/node/node_modules; B=$N/@node-llama-cpp/linux-x64/bins/linux-x64
 *   git clone -q $N/node-llama-cpp/llama/gitRelease.bundle /tmp/llamasrc
 *   cc -O2 -I/tmp/llamasrc/include -I/tmp/llamasrc/ggml/include -o /tmp/llama_cpp_ubatch
 *     tools/llama_cpp_ubatch.c $B/libllama.v0.4.0.so $B/libggml.v0.4.0.so $B/libggml-base.so -Wl,-rpath,$B
 *   /tmp/llama_cpp_ubatch MODEL.gguf N_CTX N_BATCH N_UBATCH FLASH_ATTN(0|1)
 * GPUMEM_LLAMA_LOG=1 prints every log line.
 * The model is loaded on the CPU with mmap (gpumem_make_llama_gguf makes one).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static void on_log(enum ggml_log_level level, const char* text, void* user) {
  (void)level;
  (void)user;
  if (getenv("GPUMEM_LLAMA_LOG") || strstr(text, "buffer size") || strstr(text, "n_batch") ||
      strstr(text, "n_ubatch") || strstr(text, "n_ctx ") || strstr(text, "flash_attn ") ||
      strstr(text, "graph nodes") || strstr(text, "worst-case") || strstr(text, "llama_kv_cache: size"))
    fputs(text, stdout);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s MODEL.gguf N_CTX N_BATCH N_UBATCH FLASH_ATTN(0|1)\n", argv[0]);
    return 2;
  }
  llama_log_set(on_log, NULL);
  /* The CPU backends (libggml-cpu-*.so) lie beside libllama. */
  Dl_info where;
  if (!dladdr((void*)llama_backend_init, &where)) return 1;
  ggml_backend_load_all_from_path(dirname(strdup(where.dli_fname)));
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mode = LLAMA_LOAD_MODE_MMAP;
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)atoi(argv[2]);
  cp.n_batch = (uint32_t)atoi(argv[3]);
  cp.n_ubatch = (uint32_t)atoi(argv[4]);
  cp.n_seq_max = 1;
  cp.flash_attn_type = atoi(argv[5]) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
