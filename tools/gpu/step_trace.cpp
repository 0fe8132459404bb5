// A timeline of everything the GPU and the host's waits did, for finding where a step's wall time
// goes beyond its kernels' (docs/benchmarks.md; the GPU machines' nsys cannot write its reports).
//
// A CUPTI injection library: the CUDA driver loads it into any program when CUDA_INJECTION64_PATH
// names it, and calls InitializeInjection before the first CUDA call. It records every kernel,
// copy and memset (GPU start and end), and every wait of the host on the GPU (stream, event or
// device synchronization), and with LINEA_TRACE_API=1 every CUDA runtime call the host makes, all
// on CUPTI's one clock, and writes them at exit as CSV lines
//   kind,start_ns,end_ns,stream,detail
// to the file named by LINEA_TRACE_OUT (default step_trace.csv; a rank of `--gpus N` appends
// .rankR). tools/gpu/step_gaps.py reads it.
// Build and run on the GPU machine (not part of the CMake build):
//   g++ -O2 -shared -fPIC tools/gpu/step_trace.cpp -I$CUDA/include -L$CUDA/lib64 -lcupti -o /tmp/step_trace.so
//   CUDA_INJECTION64_PATH=/tmp/step_trace.so LINEA_TRACE_OUT=trace.csv build-gpu/tools/linea bench train ...
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Record {
  const char* kind;
  uint64_t start, end;
  uint32_t stream;
  std::string detail;
};

std::mutex records_mutex;
std::vector<Record> records;

constexpr size_t kBufferBytes = 8 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

const char* sync_kind(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "event_sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "stream_wait_event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "stream_sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "device_sync";
    default: return "sync";
  }
}

void keep(const CUpti_Activity* record, std::vector<Record>& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      out.push_back({"kernel", k->start, k->end, k->streamId, k->name ? k->name : "?"});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      out.push_back({"memcpy", m->start, m->end, m->streamId,
                     "kind" + std::to_string(m->copyKind) + " bytes" + std::to_string(m->bytes)});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      out.push_back({"memset", m->start, m->end, m->streamId, "bytes" + std::to_string(m->bytes)});
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const char* name = nullptr;
      cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, api->cbid, &name);
      out.push_back({"host_api", api->start, api->end, 0, name ? name : "?"});
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      out.push_back({"host_wait", s->start, s->end, s->streamId, sync_kind(s->type)});
      break;
    }
    default: break;
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Record> batch;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) keep(record, batch);
  std::free(buffer);
  const std::lock_guard<std::mutex> lock(records_mutex);
  records.insert(records.end(), batch.begin(), batch.end());
}

void write_records() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // A data-parallel run's ranks share the environment: each writes its own file (.rankR appended).
  const char* out = std::getenv("LINEA_TRACE_OUT");
  std::string path = out ? out : "step_trace.csv";
  if (const char* rank = std::getenv("LINEA_RANK")) path += std::string(".rank") + rank;
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return;
  const std::lock_guard<std::mutex> lock(records_mutex);
  for (const Record& r : records) {
    std::string detail = r.detail;
    for (char& c : detail)
      if (c == ',') c = ';';
    std::fprintf(f, "%s,%llu,%llu,%u,%s\n", r.kind, static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.stream, detail.c_str());
  }
  std::fclose(f);
}

}  // namespace

extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION})
    cuptiActivityEnable(kind);
  // The host's runtime calls cost it about a microsecond each to record: only on request.
  if (const char* api = std::getenv("LINEA_TRACE_API"); api && *api == '1') cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  std::atexit(write_records);
  return 1;
}
