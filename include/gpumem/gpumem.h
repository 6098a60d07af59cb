/* gpumem's C API: the caching device allocator for C programs and for
 * bindings from other languages (ctypes, cffi, Rust, Go).
 *
 * A device is where memory comes from (a simulated GPU or a CUDA device);
 * an allocator caches memory from one device. Every function returns a
 * gpumem_status; on failure gpumem_last_error() says why in one line.
 * Outputs are written only on success. Allocators and devices are
 * thread-safe; an allocator keeps its device alive, so they can be
 * destroyed in any order. Sizes are bytes; streams are cudaStream_t values
 * cast to uint64_t (0 is the default stream) or a simulated stream's number.
 */
#ifndef GPUMEM_GPUMEM_H
#define GPUMEM_GPUMEM_H

#include <stddef.h>
#include <stdint.h>

/* Keeps the entry points visible when libgpumem is linked into a shared
 * library built with -fvisibility=hidden (a Python extension, a plugin). */
#if defined(__GNUC__)
#define GPUMEM_API __attribute__((visibility("default")))
#else
#define GPUMEM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpumem_status {
  GPUMEM_OK = 0,
  GPUMEM_ERROR_OUT_OF_MEMORY,    /* the device or a byte budget is full */
  GPUMEM_ERROR_INVALID_ARGUMENT, /* a null argument, a bad config string, an unknown key */
  GPUMEM_ERROR_INVALID_POINTER,  /* a pointer this allocator did not hand out (or freed twice) */
  GPUMEM_ERROR_DEVICE,           /* no usable device, or a driver call failed */
  GPUMEM_ERROR_INTERNAL          /* a bug or an unexpected failure */
} gpumem_status;

typedef struct gpumem_device gpumem_device;
typedef struct gpumem_allocator gpumem_allocator;

/* ---- Errors ---- */

/* The message of the last failure on the calling thread ("" if none yet).
 * Successful calls leave it as it was. Valid until the next failing call. */
GPUMEM_API const char* gpumem_last_error(void);
/* "GPUMEM_OK", "GPUMEM_ERROR_OUT_OF_MEMORY", ...; "GPUMEM_STATUS_UNKNOWN" otherwise. */
GPUMEM_API const char* gpumem_status_name(gpumem_status status);

/* ---- Devices ---- */

/* A simulated GPU of `capacity_bytes` that maps memory in granules of
 * `granularity_bytes` (a power of two; 0 takes 2 MiB). It never touches the
 * memory it hands out: pointers are addresses only, never dereference them. */
GPUMEM_API gpumem_status gpumem_simulated_device_create(size_t capacity_bytes, size_t granularity_bytes,
                                                        gpumem_device** out);
/* CUDA device `device` (-1: the current one) with cudaMalloc, virtual memory
 * and events. GPUMEM_ERROR_DEVICE with the reason when CUDA is unavailable. */
GPUMEM_API gpumem_status gpumem_cuda_device_create(int device, gpumem_device** out);
/* Drops the handle; the device lives on while allocators use it. NULL is allowed. */
GPUMEM_API gpumem_status gpumem_device_destroy(gpumem_device* device);

/* Simulated devices only: queue one unit of work on `stream`, or finish
 * everything queued on it, so memory freed across streams can be tested. */
GPUMEM_API gpumem_status gpumem_simulated_launch(gpumem_device* device, uint64_t stream);
GPUMEM_API gpumem_status gpumem_simulated_complete(gpumem_device* device, uint64_t stream);

/* ---- Allocators ---- */

/* A caching allocator over `device`, set up by `config` in GPUMEM_ALLOC_CONF
 * syntax ("expandable_segments:true,history:10000"); NULL reads the
 * GPUMEM_ALLOC_CONF environment variable. A config that does not parse, or
 * breaks a rule of validate() in gpumem/alloc/config.h (round_bytes 256, say),
 * is INVALID_ARGUMENT, and gpumem_last_error() names the key and its value;
 * *out is left untouched. */
GPUMEM_API gpumem_status gpumem_allocator_create(gpumem_device* device, const char* config,
                                                 gpumem_allocator** out);
/* Gives all cached memory back to the device; pointers still allocated from
 * it become invalid. NULL is allowed. */
GPUMEM_API gpumem_status gpumem_allocator_destroy(gpumem_allocator* allocator);

/* `bytes` of device memory usable in order on `stream`; 0 bytes gives NULL.
 * OUT_OF_MEMORY's message describes the allocator's state. */
GPUMEM_API gpumem_status gpumem_malloc(gpumem_allocator* allocator, size_t bytes, uint64_t stream, void** out);
/* gpumem_malloc with a tag (NULL or "" for none) naming the allocation in
 * snapshots, history and out-of-memory messages. */
GPUMEM_API gpumem_status gpumem_malloc_tagged(gpumem_allocator* allocator, size_t bytes, uint64_t stream,
                                              const char* tag, void** out);
/* Frees `ptr` (NULL does nothing). A stream other than the allocation's
 * delays reuse until that stream's queued work is done. */
GPUMEM_API gpumem_status gpumem_free(gpumem_allocator* allocator, void* ptr, uint64_t stream);
/* Marks `ptr` as used by `stream` too (torch's Tensor.record_stream): once
 * freed, it is reused only after that stream's queued work is done. */
GPUMEM_API gpumem_status gpumem_record_stream(gpumem_allocator* allocator, void* ptr, uint64_t stream);
/* An iteration (a training step, a batch of fixed shape) begins. With
 * "planned:true" in the config, the first iteration is recorded, and the
 * following ones are served from one arena at offsets planned for it (see
 * docs/allocator.md, "Planned mode"); otherwise this does nothing. */
GPUMEM_API gpumem_status gpumem_step(gpumem_allocator* allocator);
/* Planned mode: serve from the plan in `path` (what `gpumem trace plan`
 * writes) from the next gpumem_step() on, so that even the first iteration
 * comes from the arena. INVALID_ARGUMENT for an allocator made without
 * "planned:true", or a file that is not such a plan (the message names the
 * file and the problem). */
GPUMEM_API gpumem_status gpumem_use_plan_file(gpumem_allocator* allocator, const char* path);
/* Planned mode's counts: requests served from the arena, those served by the
 * cache while a plan was in force, and the arena's bytes (all 0 when the
 * allocator is not planned). Any of the pointers may be NULL. */
GPUMEM_API gpumem_status gpumem_planned_stats(gpumem_allocator* allocator, uint64_t* planned, uint64_t* missed,
                                              size_t* arena_bytes);
/* Planned mode: the bytes held now in device allocations of their own (the
 * recorded iteration's requests, and those the plan expects to outlive their
 * iteration; those under 512 bytes share 4 KiB chunks, counted whole); 0
 * when the allocator is not planned. Neither the cache's statistics nor the
 * arena count them. */
GPUMEM_API gpumem_status gpumem_planned_device_bytes(gpumem_allocator* allocator, size_t* bytes);
/* Planned mode's shapes: iterations recorded (the first, the one after a
 * set-up iteration, each new shape's), switches to another kept plan early
 * in an iteration, and the plans kept (at most "planned_shapes"); all 0
 * when the allocator is not planned. Any of the pointers may be NULL. */
GPUMEM_API gpumem_status gpumem_planned_shapes(gpumem_allocator* allocator, uint64_t* recordings,
                                               uint64_t* shape_switches, size_t* shapes);
/* Waits for pending frees, then gives every fully free cached segment back. */
GPUMEM_API gpumem_status gpumem_empty_cache(gpumem_allocator* allocator);
/* Every peak statistic starts again from its current value. */
GPUMEM_API gpumem_status gpumem_reset_peak_stats(gpumem_allocator* allocator);

/* One statistic by its torch.cuda.memory_stats() name, e.g.
 * "allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "num_ooms". */
GPUMEM_API gpumem_status gpumem_get_stat(gpumem_allocator* allocator, const char* key, int64_t* out);

/* Text like torch.cuda.memory_summary(). Buffers work as snprintf's: as much
 * as fits in `size` bytes is written, always NUL-terminated (when size > 0);
 * `*needed` (if not NULL) gets the full length plus one. buffer may be NULL
 * when size is 0, to ask for the size first. */
GPUMEM_API gpumem_status gpumem_memory_summary(gpumem_allocator* allocator, char* buffer, size_t size,
                                               size_t* needed);
/* The segments and blocks as JSON (docs/allocator.md, "Statistics, snapshots, history"); same buffer rules. */
GPUMEM_API gpumem_status gpumem_snapshot_json(gpumem_allocator* allocator, char* buffer, size_t size,
                                              size_t* needed);
/* Writes the allocation history as JSON lines to `path`, atomically (readers
 * never see half a file). Needs "history:N" in the config to hold events. */
GPUMEM_API gpumem_status gpumem_write_history(gpumem_allocator* allocator, const char* path);

#ifdef __cplusplus
}
#endif

#endif /* GPUMEM_GPUMEM_H */
