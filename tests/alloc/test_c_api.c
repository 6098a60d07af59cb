/* The C API end to end on a simulated device, compiled as C11 so that the
 * header is proven to be plain C. Exits non-zero when any check fails.
 * argv[1]: where to write the history file (default: the current directory). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpumem/gpumem.h"

static int g_failures = 0;

#define CHECK(cond)                                                                                                  \
  do {                                                                                                               \
    if (!(cond)) {                                                                                                   \
      ++g_failures;                                                                                                  \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, gpumem_last_error()); \
    }                                                                                                                \
  } while (0)

#define CHECK_STATUS(call, expected) CHECK((call) == (expected))

static const size_t kMiB = (size_t)1 << 20;

static int contains(const char* text, const char* part) { return strstr(text, part) != NULL; }

static int64_t stat_of(gpumem_allocator* a, const char* key) {
  int64_t value = -1;
  CHECK_STATUS(gpumem_get_stat(a, key, &value), GPUMEM_OK);
  return value;
}

static void test_status_names(void) {
  CHECK(strcmp(gpumem_status_name(GPUMEM_OK), "GPUMEM_OK") == 0);
  CHECK(strcmp(gpumem_status_name(GPUMEM_ERROR_INVALID_POINTER), "GPUMEM_ERROR_INVALID_POINTER") == 0);
  CHECK(strcmp(gpumem_status_name((gpumem_status)99), "GPUMEM_STATUS_UNKNOWN") == 0);
}

static void test_null_arguments(void) {
  void* p = NULL;
  gpumem_device* device = NULL;
  CHECK_STATUS(gpumem_malloc(NULL, 16, 0, &p), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK(contains(gpumem_last_error(), "gpumem_malloc: allocator is NULL"));
  CHECK_STATUS(gpumem_simulated_device_create(kMiB, 0, NULL), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(gpumem_simulated_device_create(0, 0, &device), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(gpumem_simulated_device_create(kMiB, 3000, &device), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK(contains(gpumem_last_error(), "granularity"));
  CHECK_STATUS(gpumem_allocator_create(NULL, "", NULL), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(gpumem_simulated_launch(NULL, 1), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(gpumem_device_destroy(NULL), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_destroy(NULL), GPUMEM_OK);
}

static void test_malloc_free_and_stats(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  void* p = NULL;
  void* q = NULL;
  CHECK_STATUS(gpumem_allocator_create(device, "round_bytes:512", &a), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_malloc(a, 1000, 0, &p), GPUMEM_OK);
  CHECK(p != NULL);
  CHECK((uintptr_t)p % 256 == 0);
  CHECK_STATUS(gpumem_malloc_tagged(a, 3 * kMiB, 0, "weights", &q), GPUMEM_OK);
  CHECK(q != NULL && q != p);
  CHECK(stat_of(a, "allocation.all.current") == 2);
  CHECK(stat_of(a, "allocated_bytes.small_pool.current") == 1024);
  CHECK(stat_of(a, "requested_bytes.all.current") == (int64_t)(1000 + 3 * kMiB));
  CHECK(stat_of(a, "reserved_bytes.all.current") >= stat_of(a, "allocated_bytes.all.current"));

  CHECK_STATUS(gpumem_free(a, q, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_free(a, NULL, 0), GPUMEM_OK);
  CHECK(stat_of(a, "allocation.all.current") == 0);
  CHECK(stat_of(a, "allocated_bytes.all.current") == 0);
  CHECK(stat_of(a, "allocated_bytes.all.peak") >= (int64_t)(3 * kMiB));
  CHECK_STATUS(gpumem_reset_peak_stats(a), GPUMEM_OK);
  CHECK(stat_of(a, "allocated_bytes.all.peak") == 0);
  CHECK_STATUS(gpumem_empty_cache(a), GPUMEM_OK);
  CHECK(stat_of(a, "reserved_bytes.all.current") == 0);

  {
    int64_t value = 42;
    CHECK_STATUS(gpumem_get_stat(a, "allocated_bytes.everything", &value), GPUMEM_ERROR_INVALID_ARGUMENT);
    CHECK(contains(gpumem_last_error(), "allocated_bytes.everything"));
    CHECK(value == 42); /* outputs are untouched on failure */
    CHECK_STATUS(gpumem_get_stat(a, NULL, &value), GPUMEM_ERROR_INVALID_ARGUMENT);
  }

  {
    void* zero = &zero;
    CHECK_STATUS(gpumem_malloc(a, 0, 0, &zero), GPUMEM_OK);
    CHECK(zero == NULL);
  }
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

static void test_invalid_pointers(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  void* p = NULL;
  int on_stack = 0;
  CHECK_STATUS(gpumem_allocator_create(device, "", &a), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_free(a, &on_stack, 0), GPUMEM_ERROR_INVALID_POINTER);
  CHECK(contains(gpumem_last_error(), "gpumem_free: "));
  CHECK(contains(gpumem_last_error(), "not allocated by this allocator"));
  CHECK_STATUS(gpumem_malloc(a, 4096, 0, &p), GPUMEM_OK);
  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_ERROR_INVALID_POINTER); /* twice */
  CHECK_STATUS(gpumem_record_stream(a, &on_stack, 1), GPUMEM_ERROR_INVALID_POINTER);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

static void test_bad_config(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  CHECK_STATUS(gpumem_allocator_create(device, "bogus_key:1", &a), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK(a == NULL);
  CHECK(contains(gpumem_last_error(), "gpumem_allocator_create: "));
  CHECK(contains(gpumem_last_error(), "bogus_key"));
  CHECK(strchr(gpumem_last_error(), '\n') == NULL);
  CHECK_STATUS(gpumem_allocator_create(device, "round_bytes:300", &a), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK(contains(gpumem_last_error(), "round_bytes"));
}

/* publish_interval_ms makes the allocator publish its statistics for
 * `gpumem exporter` in /dev/shm/gpumem.<pid>.0; one allocator per device and
 * process publishes, and destroying it removes the block. */
static void test_publishing(gpumem_device* device) {
  char path[64];
  snprintf(path, sizeof path, "/dev/shm/gpumem.%ld.0", (long)getpid());
  gpumem_allocator* a = NULL;
  gpumem_allocator* b = NULL;
  CHECK_STATUS(gpumem_allocator_create(device, "publish_interval_ms:5", &a), GPUMEM_OK);
  CHECK(access(path, F_OK) == 0);
  CHECK_STATUS(gpumem_allocator_create(device, "publish_interval_ms:5", &b), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK(b == NULL);
  CHECK(contains(gpumem_last_error(), "one allocator per device and process publishes"));
  CHECK_STATUS(gpumem_allocator_create(device, "publish_interval_ms:0", &b), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_destroy(b), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
  CHECK(access(path, F_OK) != 0);
}

/* "planned:true": after gpumem_step() marks iterations, the first is
 * recorded and the next ones come from the planned arena. */
static void test_planned(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  CHECK_STATUS(gpumem_allocator_create(device, "planned:true", &a), GPUMEM_OK);
  for (int iteration = 0; iteration < 4; ++iteration) {
    void* p[3] = {NULL, NULL, NULL};
    CHECK_STATUS(gpumem_step(a), GPUMEM_OK);
    for (int k = 0; k < 3; ++k) CHECK_STATUS(gpumem_malloc(a, (size_t)(k + 1) * kMiB, 0, &p[k]), GPUMEM_OK);
    CHECK(p[0] != p[1] && p[1] != p[2]);
    size_t own = 1;
    CHECK_STATUS(gpumem_planned_device_bytes(a, &own), GPUMEM_OK);
    CHECK(own == (iteration == 0 ? 6 * kMiB : 0)); /* the recording takes each from the device */
    for (int k = 2; k >= 0; --k) CHECK_STATUS(gpumem_free(a, p[k], 0), GPUMEM_OK);
  }
  uint64_t planned = 0, missed = 0;
  size_t arena = 0;
  CHECK_STATUS(gpumem_planned_stats(a, &planned, &missed, &arena), GPUMEM_OK);
  CHECK(planned == 9); /* iterations 2 to 4, three requests each */
  CHECK(missed == 0);
  CHECK(arena == 6 * kMiB); /* the three live at once */
  uint64_t recordings = 0, switches = 1;
  size_t shapes = 0;
  CHECK_STATUS(gpumem_planned_shapes(a, &recordings, &switches, &shapes), GPUMEM_OK);
  CHECK(recordings == 1); /* nothing outlives the first iteration: no set-up */
  CHECK(switches == 0);
  CHECK(shapes == 1);
  int on_stack = 0;
  CHECK_STATUS(gpumem_free(a, &on_stack, 0), GPUMEM_ERROR_INVALID_POINTER);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
  /* A plan from a file (what `gpumem trace plan` writes) serves the very
   * first iteration. */
  {
    const char* path = "gpumem_c_api_plan.json";
    FILE* f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
      fputs("{\"format\":\"gpumem-iteration-plan\",\"version\":1,\"arena_bytes\":6291456,"
            "\"requests\":[[1048576,0],[2097152,1048576],[3145728,3145728]]}", f);
      fclose(f);
    }
    gpumem_allocator* b = NULL;
    CHECK_STATUS(gpumem_allocator_create(device, "planned:true", &b), GPUMEM_OK);
    CHECK_STATUS(gpumem_use_plan_file(b, path), GPUMEM_OK);
    CHECK_STATUS(gpumem_step(b), GPUMEM_OK);
    void* q[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; ++k) CHECK_STATUS(gpumem_malloc(b, (size_t)(k + 1) * kMiB, 0, &q[k]), GPUMEM_OK);
    CHECK_STATUS(gpumem_planned_stats(b, &planned, NULL, &arena), GPUMEM_OK);
    CHECK(planned == 3);
    CHECK(arena == 6 * kMiB);
    for (int k = 0; k < 3; ++k) CHECK_STATUS(gpumem_free(b, q[k], 0), GPUMEM_OK);
    CHECK_STATUS(gpumem_use_plan_file(b, "/nonexistent/plan.json"), GPUMEM_ERROR_INVALID_ARGUMENT);
    CHECK(contains(gpumem_last_error(), "/nonexistent/plan.json"));
    CHECK_STATUS(gpumem_allocator_destroy(b), GPUMEM_OK);
    remove(path);
  }
  /* Without planned:true, gpumem_step() does nothing. */
  CHECK_STATUS(gpumem_allocator_create(device, NULL, &a), GPUMEM_OK);
  CHECK_STATUS(gpumem_step(a), GPUMEM_OK);
  CHECK_STATUS(gpumem_planned_stats(a, &planned, NULL, NULL), GPUMEM_OK);
  CHECK(planned == 0);
  CHECK_STATUS(gpumem_planned_shapes(a, &recordings, NULL, &shapes), GPUMEM_OK);
  CHECK(recordings == 0 && shapes == 0);
  CHECK_STATUS(gpumem_use_plan_file(a, "any.json"), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK(contains(gpumem_last_error(), "planned:true"));
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

/* Configs the allocator's free index cannot serve are refused when the
 * allocator is made, with one line that names the setting and its value. */
static void test_invalid_configs(gpumem_device* device) {
  static const char* const configs[][2] = {
      /* the review's reproduction: 256-byte blocks in 512-byte bins overlap */
      {"round_bytes:256", "round_bytes is 256 bytes"},
      /* 1000 bytes: not a multiple of the 512-byte rounding */
      {"small_size_mb:0,small_segment_mb:0.00095367431640625", "small_segment_mb is 1000 bytes"},
      /* a 64 MiB shared segment could never be split for the requests it serves */
      {"large_segment_mb:64,max_split_size_mb:32", "max_split_size_mb is 33554432 bytes"},
  };
  size_t i;
  for (i = 0; i < sizeof configs / sizeof configs[0]; ++i) {
    gpumem_allocator* a = NULL;
    CHECK_STATUS(gpumem_allocator_create(device, configs[i][0], &a), GPUMEM_ERROR_INVALID_ARGUMENT);
    CHECK(a == NULL);
    CHECK(contains(gpumem_last_error(), "gpumem_allocator_create: "));
    CHECK(contains(gpumem_last_error(), configs[i][1]));
    CHECK(strchr(gpumem_last_error(), '\n') == NULL);
    if (a != NULL) gpumem_allocator_destroy(a);
  }
}

/* ctest sets GPUMEM_ALLOC_CONF=round_bytes:4096 for this program. */
static void test_config_from_environment(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  void* p = NULL;
  const char* env = getenv("GPUMEM_ALLOC_CONF");
  CHECK_STATUS(gpumem_allocator_create(device, NULL, &a), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_malloc(a, 1, 0, &p), GPUMEM_OK);
  if (env != NULL && strcmp(env, "round_bytes:4096") == 0) CHECK(stat_of(a, "allocated_bytes.all.current") == 4096);
  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

static void test_out_of_memory(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  void* p = &p;
  CHECK_STATUS(gpumem_allocator_create(device, "", &a), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_malloc_tagged(a, 1024 * kMiB, 0, "huge", &p), GPUMEM_ERROR_OUT_OF_MEMORY);
  CHECK(p == &p);
  CHECK(contains(gpumem_last_error(), "gpumem_malloc_tagged: "));
  CHECK(strlen(gpumem_last_error()) > strlen("gpumem_malloc_tagged: "));
  CHECK(stat_of(a, "num_ooms") == 1);
  CHECK_STATUS(gpumem_malloc(a, kMiB, 0, &p), GPUMEM_OK); /* still usable */
  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

static void test_buffers(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  void* p = NULL;
  size_t needed = 0;
  size_t again = 0;
  char small[16];
  char* full = NULL;
  CHECK_STATUS(gpumem_allocator_create(device, "", &a), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_malloc_tagged(a, 5000, 0, "activations", &p), GPUMEM_OK);

  CHECK_STATUS(gpumem_memory_summary(a, NULL, 0, &needed), GPUMEM_OK);
  CHECK(needed > sizeof small);
  memset(small, 'x', sizeof small);
  CHECK_STATUS(gpumem_memory_summary(a, small, sizeof small, &again), GPUMEM_OK);
  CHECK(again == needed);
  CHECK(small[sizeof small - 1] == '\0');
  CHECK(strlen(small) == sizeof small - 1);
  full = (char*)malloc(needed);
  CHECK_STATUS(gpumem_memory_summary(a, full, needed, NULL), GPUMEM_OK);
  CHECK(strlen(full) == needed - 1);
  CHECK(strncmp(full, small, sizeof small - 1) == 0);
  free(full);
  CHECK_STATUS(gpumem_memory_summary(a, NULL, 5, &needed), GPUMEM_ERROR_INVALID_ARGUMENT);

  CHECK_STATUS(gpumem_snapshot_json(a, NULL, 0, &needed), GPUMEM_OK);
  full = (char*)malloc(needed);
  CHECK_STATUS(gpumem_snapshot_json(a, full, needed, NULL), GPUMEM_OK);
  CHECK(strncmp(full, "{\"segments\":[", 13) == 0);
  CHECK(contains(full, "\"tag\":\"activations\""));
  free(full);

  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

static void test_history(gpumem_device* device, const char* path) {
  gpumem_allocator* a = NULL;
  void* p = NULL;
  char line[256] = {0};
  FILE* file = NULL;
  int found = 0;
  CHECK_STATUS(gpumem_allocator_create(device, "history:100", &a), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_malloc_tagged(a, 2048, 0, "grads", &p), GPUMEM_OK);
  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_write_history(a, path), GPUMEM_OK);
  file = fopen(path, "r");
  CHECK(file != NULL);
  if (file != NULL) {
    CHECK(fgets(line, sizeof line, file) != NULL);
    CHECK(contains(line, "\"format\":\"gpumem-history\""));
    /* Segment events come first; the allocation follows with its tag. */
    while (!found && fgets(line, sizeof line, file) != NULL) found = contains(line, "\"tag\":\"grads\"");
    CHECK(found);
    fclose(file);
  }
  remove(path);
  CHECK_STATUS(gpumem_write_history(a, "/nonexistent-gpumem-dir/history.jsonl"), GPUMEM_ERROR_INVALID_ARGUMENT);
  CHECK(contains(gpumem_last_error(), "nonexistent-gpumem-dir"));
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

/* A free on another stream waits for that stream's queued work. */
static void test_streams(gpumem_device* device) {
  gpumem_allocator* a = NULL;
  void* p = NULL;
  CHECK_STATUS(gpumem_allocator_create(device, "", &a), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_malloc(a, 4096, 1, &p), GPUMEM_OK);
  CHECK_STATUS(gpumem_record_stream(a, p, 2), GPUMEM_OK);
  CHECK_STATUS(gpumem_simulated_launch(device, 2), GPUMEM_OK);
  CHECK_STATUS(gpumem_free(a, p, 1), GPUMEM_OK);
  CHECK(stat_of(a, "active.all.current") == 1); /* pending until stream 2 finishes */
  CHECK_STATUS(gpumem_simulated_complete(device, 2), GPUMEM_OK);
  CHECK_STATUS(gpumem_empty_cache(a), GPUMEM_OK);
  CHECK(stat_of(a, "active.all.current") == 0);
  CHECK(stat_of(a, "reserved_bytes.all.current") == 0);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

/* The allocator keeps its device alive: destroy order does not matter. */
static void test_destroy_order(void) {
  gpumem_device* device = NULL;
  gpumem_allocator* a = NULL;
  void* p = NULL;
  CHECK_STATUS(gpumem_simulated_device_create(64 * kMiB, 0, &device), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_create(device, "", &a), GPUMEM_OK);
  CHECK_STATUS(gpumem_device_destroy(device), GPUMEM_OK);
  if (a == NULL) return;
  CHECK_STATUS(gpumem_malloc(a, 100, 0, &p), GPUMEM_OK);
  CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
  CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
}

static void test_cuda_device(void) {
  gpumem_device* device = NULL;
  gpumem_status status = gpumem_cuda_device_create(-1, &device);
  CHECK(status == GPUMEM_OK || status == GPUMEM_ERROR_DEVICE);
  if (status == GPUMEM_OK) {
    gpumem_allocator* a = NULL;
    void* p = NULL;
    CHECK_STATUS(gpumem_simulated_launch(device, 1), GPUMEM_ERROR_INVALID_ARGUMENT);
    CHECK(contains(gpumem_last_error(), "not a simulated device"));
    CHECK_STATUS(gpumem_allocator_create(device, "expandable_segments:true", &a), GPUMEM_OK);
    if (a != NULL) {
      CHECK_STATUS(gpumem_malloc(a, 3 * kMiB, 0, &p), GPUMEM_OK);
      CHECK(p != NULL);
      CHECK_STATUS(gpumem_free(a, p, 0), GPUMEM_OK);
      CHECK_STATUS(gpumem_empty_cache(a), GPUMEM_OK);
      CHECK(stat_of(a, "reserved_bytes.all.current") == 0);
      CHECK_STATUS(gpumem_allocator_destroy(a), GPUMEM_OK);
    }
    CHECK_STATUS(gpumem_device_destroy(device), GPUMEM_OK);
  } else {
    CHECK(device == NULL);
    CHECK(strlen(gpumem_last_error()) > strlen("gpumem_cuda_device_create: "));
  }
}

int main(int argc, char** argv) {
  const char* history_path = argc > 1 ? argv[1] : "gpumem_c_api_history.jsonl";
  gpumem_device* device = NULL;

  test_status_names();
  test_null_arguments();
  CHECK_STATUS(gpumem_simulated_device_create(256 * kMiB, 2 * kMiB, &device), GPUMEM_OK);
  if (device == NULL) return 1;
  test_malloc_free_and_stats(device);
  test_invalid_pointers(device);
  test_bad_config(device);
  test_publishing(device);
  test_planned(device);
  test_invalid_configs(device);
  test_config_from_environment(device);
  test_out_of_memory(device);
  test_buffers(device);
  test_history(device, history_path);
  test_streams(device);
  CHECK_STATUS(gpumem_device_destroy(device), GPUMEM_OK);
  test_destroy_order();
  test_cuda_device();

  if (g_failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("C API: all checks passed\n");
  return 0;
}
