#include "train/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "tensor/error.h"
#include "train/checksum.h"

namespace linea::train {

namespace fs = std::filesystem;

namespace {

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

// The temporary name carries the process id, so two processes writing one path cannot
// interleave their bytes in one temporary file.
AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temp_path_(path_ + ".tmp" + std::to_string(::getpid())) {
  std::error_code ec;
  fs::create_directories(parent_of(path_), ec);  // a failure shows up as the open's error
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_step("create a temporary file");
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_path_.c_str());
}

void AtomicFile::fail_step(const char* step) {
  const int saved = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
  fail("write_file", "cannot write '", path_, "' (", step, "): ", std::strerror(saved));
}

void AtomicFile::write(const void* data, size_t n) {
  LINEA_CHECK(fd_ >= 0, "write_file", "write to '", path_, "' after commit");
  const char* bytes = static_cast<const char*>(data);
  // Retries the interruptions and short writes that POSIX allows.
  while (n > 0) {
    const ssize_t written = ::write(fd_, bytes, n);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) fail_step("write");
    bytes += written;
    n -= static_cast<size_t>(written);
  }
}

void AtomicFile::commit() {
  LINEA_CHECK(fd_ >= 0, "write_file", "'", path_, "' committed twice");
  if (::fsync(fd_) != 0) fail_step("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_step("close");
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail_step("rename");
  sync_directory(parent_of(path_));
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

InputFile::InputFile(std::string path, const char* what) : path_(std::move(path)), what_(what) {
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  if (status.type() == fs::file_type::not_found) fail("read_file", "the ", what_, " '", path_, "' does not exist");
  if (!ec && status.type() != fs::file_type::regular)
    fail("read_file", "the ", what_, " '", path_, "' is not a regular file");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("read_file", "cannot open the ", what_, " '", path_, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int saved = errno;
    ::close(fd_);
    fail("read_file", "cannot open the ", what_, " '", path_, "': ", std::strerror(saved));
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() { ::close(fd_); }

void InputFile::read_at(uint64_t offset, void* dst, size_t n) const {
  LINEA_CHECK(offset <= size_ && n <= size_ - offset, "read_file", "reading ", n, " bytes at offset ", offset,
              " of the ", what_, " '", path_, "' goes past its end (", size_, " bytes)");
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    // got == 0: the file shrank after it was opened.
    if (got <= 0) fail("read_file", "error reading the ", what_, " '", path_, "'");
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

std::string read_file(const std::string& path, const char* what) {
  const InputFile file(path, what);
  std::string bytes(file.size(), '\0');
  file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

void sync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int rc = fd < 0 ? -1 : ::fsync(fd);
  const int saved = errno;
  if (fd >= 0) ::close(fd);
  if (rc != 0) fail("write_file", "cannot flush the directory '", path, "': ", std::strerror(saved));
}

uint64_t file_fnv1a64(const std::string& path, const char* what) {
  const InputFile file(path, what);
  std::vector<char> chunk(1 << 20);
  uint64_t hash = kFnvOffset;
  for (uint64_t offset = 0; offset < file.size(); offset += chunk.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), file.size() - offset));
    file.read_at(offset, chunk.data(), n);
    hash = fnv1a64(chunk.data(), n, hash);
  }
  return hash;
}

}  // namespace linea::train
