#pragma once
// Files that survive crashes, shared by everything in train/ that writes (tokenizers, token
// caches, safetensors, checkpoints).
//
// Writes are atomic: the bytes go to a temporary file beside <path>, which is flushed to disk
// (fsync) and only then renamed over <path>; the rename itself is made durable by syncing the
// parent directory. A crash at any moment leaves either the old file or the new one under <path>,
// never a prefix of the new one. Missing parent directories are created.
//
// Errors are linea::Error naming the path and the system's reason ("No space left on device").
#include <cstdint>
#include <string>
#include <string_view>

namespace linea::train {

// A file written piece by piece (a large safetensors file never sits in memory whole).
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  // Without commit() (an exception on the way), the temporary file is removed and <path> is
  // left as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // fsync, close, rename into place, fsync the directory.
  void commit();

 private:
  [[noreturn]] void fail_step(const char* step);
  std::string path_, temp_path_;
  int fd_ = -1;
};

void write_file_atomically(const std::string& path, std::string_view bytes);

// A file opened for positioned reads, so a large file is read piece by piece into its final place.
// `what` names the file's role in errors: "cannot open the tokenizer file 'x': ...".
class InputFile {
 public:
  InputFile(std::string path, const char* what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Exactly n bytes at offset, or an Error (a file that shrank while being read is one).
  void read_at(uint64_t offset, void* dst, size_t n) const;

 private:
  std::string path_;
  const char* what_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole file.
std::string read_file(const std::string& path, const char* what);

// Makes a directory's entries (files created, renamed or removed in it) durable.
void sync_directory(const std::string& path);

// FNV-1a 64 (train/checksum.h) of a file's bytes, read in pieces.
uint64_t file_fnv1a64(const std::string& path, const char* what);

}  // namespace linea::train
