#include "engine/zip.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <new>
#include <set>

#include "engine/error.h"
#include "engine/memory.h"

namespace psi {

namespace {

// Record signatures and fixed sizes (APPNOTE.TXT 4.3).
constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr std::size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kEnd64Size = 56, kLocator64Size = 20;
// Deflate expands at most 1,032-fold; psi refuses more, as hdf5/h5_read.cpp does.
constexpr std::uint64_t kMaxDeflateRatio = 1100;

// Little-endian fields read at an offset already checked against the archive.
class Fields {
 public:
  explicit Fields(std::string_view s) : s_(s) {}
  std::uint64_t le(std::uint64_t at, int n) const {
    std::uint64_t v = 0;
    for (int i = n; i-- > 0;) v = v << 8 | std::uint8_t(s_[std::size_t(at) + std::size_t(i)]);
    return v;
  }
  std::uint16_t u16(std::uint64_t at) const { return std::uint16_t(le(at, 2)); }
  std::uint32_t u32(std::uint64_t at) const { return std::uint32_t(le(at, 4)); }
  std::uint64_t u64(std::uint64_t at) const { return le(at, 8); }

 private:
  std::string_view s_;
};

std::string member_str(const std::string& m) { return "member \"" + m.substr(0, 200) + "\""; }

// The end of central directory record: the last signature whose comment ends exactly at the end
// of the archive (a comment may itself hold the signature's bytes).
std::uint64_t find_end(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kEndSize)
    throw Error(name + ": truncated zip archive: " + std::to_string(bytes.size()) + " bytes, less than its end record");
  const Fields f(bytes);
  const std::uint64_t last = bytes.size() - kEndSize;
  const std::uint64_t first = last > 0xffff ? last - 0xffff : 0;
  for (std::uint64_t at = last + 1; at-- > first;)
    if (f.u32(at) == kEndSig && at + kEndSize + f.u16(at + 20) == bytes.size()) return at;
  throw Error(name + ": truncated or corrupt zip archive: no end of central directory record at its end");
}

struct Directory {
  std::uint64_t entries = 0, offset = 0, size = 0, end = 0;  // end: where the record after it begins
};

Directory read_directory(std::string_view bytes, const std::string& name) {
  const Fields f(bytes);
  const std::uint64_t end = find_end(bytes, name);
  if (f.u16(end + 4) != 0 || f.u16(end + 6) != 0 || f.u16(end + 8) != f.u16(end + 10))
    throw Error(name + ": a multi-disk (split or spanned) zip archive, which psi does not read");
  Directory d{f.u16(end + 10), f.u32(end + 16), f.u32(end + 12), end};
  // ZIP64: a saturated field defers to the ZIP64 end record, found through the locator just
  // before the end record (numpy writes one for archives past 4 GiB or 65,535 members).
  const bool saturated = d.entries == 0xffff || d.offset == 0xffffffff || d.size == 0xffffffff;
  const bool locator = end >= kLocator64Size && f.u32(end - kLocator64Size) == kLocator64Sig;
  if (saturated && !locator)
    throw Error(name + ": corrupt zip archive: its end record defers to a ZIP64 record, and there is none before it");
  if (locator) {
    const std::uint64_t loc = end - kLocator64Size;
    if (f.u32(loc + 4) != 0 || f.u32(loc + 16) > 1)
      throw Error(name + ": a multi-disk (split or spanned) zip archive, which psi does not read");
    const std::uint64_t at = f.u64(loc + 8);
    if (at > loc || loc - at < kEnd64Size || f.u32(at) != kEnd64Sig)
      throw Error(name + ": corrupt zip archive: the ZIP64 end record's offset " + std::to_string(at) +
                  " does not lead to one before byte " + std::to_string(loc));
    if (f.u32(at + 16) != 0 || f.u32(at + 20) != 0 || f.u64(at + 24) != f.u64(at + 32))
      throw Error(name + ": a multi-disk (split or spanned) zip archive, which psi does not read");
    d = Directory{f.u64(at + 32), f.u64(at + 48), f.u64(at + 40), at};
  }
  if (d.offset > d.end || d.size != d.end - d.offset)
    throw Error(name + ": truncated or corrupt zip archive: its central directory (" + std::to_string(d.size) +
                " bytes at offset " + std::to_string(d.offset) + ") does not end where its end record begins (byte " +
                std::to_string(d.end) + ")");
  if (d.entries > d.size / kCentralSize)
    throw Error(name + ": corrupt zip archive: " + std::to_string(d.entries) + " members declared in a " +
                std::to_string(d.size) + "-byte central directory");
  return d;
}

// The ZIP64 extended information of a central header: the 64-bit values of whichever of the
// uncompressed size, compressed size and local header offset are saturated, in that order.
void read_zip64_extra(const Fields& f, std::uint64_t at, std::uint64_t len, std::uint64_t& usize,
                      std::uint64_t& csize, std::uint64_t& offset, const std::string& where) {
  const std::uint64_t end = at + len;
  while (end - at >= 4) {
    const std::uint16_t id = f.u16(at), n = f.u16(at + 2);
    if (n > end - at - 4) throw Error(where + ": an extra field runs past its header");
    if (id == 0x0001) {
      std::uint64_t p = at + 4;
      for (std::uint64_t* v : {&usize, &csize, &offset}) {
        if (*v != 0xffffffff) continue;
        if (at + 4 + n - p < 8) throw Error(where + ": its ZIP64 extra field lacks a size or offset it defers to");
        *v = f.u64(p);
        p += 8;
      }
      return;
    }
    at += 4 + std::uint64_t(n);
  }
  if (usize == 0xffffffff || csize == 0xffffffff || offset == 0xffffffff)
    throw Error(where + ": a saturated size or offset, and no ZIP64 extra field holding it");
}

}  // namespace

std::vector<ZipMember> zip_members(std::string_view bytes, const std::string& name) {
  const Fields f(bytes);
  const Directory d = read_directory(bytes, name);
  std::vector<ZipMember> out;
  std::vector<std::uint64_t> local_offsets;
  std::set<std::string> seen;
  std::uint64_t at = d.offset;
  for (std::uint64_t i = 0; i < d.entries; ++i) {
    const std::string entry = name + ": central directory entry " + std::to_string(i);
    if (d.end - at < kCentralSize || f.u32(at) != kCentralSig)
      throw Error(entry + ": not a central directory header (truncated or corrupt archive)");
    const std::uint64_t name_len = f.u16(at + 28), extra_len = f.u16(at + 30), comment_len = f.u16(at + 32);
    if (name_len + extra_len + comment_len > d.end - at - kCentralSize)
      throw Error(entry + ": its name, extra field and comment run past the central directory");
    ZipMember m;
    m.name.assign(bytes.substr(std::size_t(at + kCentralSize), std::size_t(name_len)));
    const std::string where = name + ": " + member_str(m.name);
    if (m.name.find('\0') != std::string::npos) throw Error(where + ": a NUL byte in its name");
    const std::uint16_t flags = f.u16(at + 8);
    m.method = f.u16(at + 10);
    m.crc32 = f.u32(at + 16);
    m.compressed = f.u32(at + 20);
    m.uncompressed = f.u32(at + 24);
    std::uint64_t local = f.u32(at + 42);
    if (flags & 0x0041 || m.method == 99) throw Error(where + ": encrypted, which psi does not read");
    if (m.method != 0 && m.method != 8)
      throw Error(where + ": compression method " + std::to_string(m.method) +
                  "; psi reads stored (0) and deflate (8), as numpy.savez and numpy.savez_compressed write");
    if (f.u16(at + 34) != 0 && f.u16(at + 34) != 0xffff)
      throw Error(where + ": on disk " + std::to_string(f.u16(at + 34)) + " of a multi-disk archive, which psi does not read");
    read_zip64_extra(f, at + kCentralSize + name_len, extra_len, m.uncompressed, m.compressed, local, where);
    if (!seen.insert(m.name).second) throw Error(where + ": appears twice in the archive");
    at += kCentralSize + name_len + extra_len + comment_len;

    // The local header: the same name and method, its data wholly before the central directory.
    if (local > d.offset || d.offset - local < kLocalSize || f.u32(local) != kLocalSig)
      throw Error(where + ": its local header offset " + std::to_string(local) +
                  " does not lead to a local header before the central directory");
    const std::uint64_t lname = f.u16(local + 26), lextra = f.u16(local + 28);
    if (lname + lextra > d.offset - local - kLocalSize)
      throw Error(where + ": its local header runs into the central directory");
    if (bytes.substr(std::size_t(local + kLocalSize), std::size_t(lname)) != m.name)
      throw Error(where + ": its local header names another member");
    if (f.u16(local + 8) != m.method || (f.u16(local + 6) & 0x0041))
      throw Error(where + ": its local header's method or encryption disagrees with the central directory");
    m.data_offset = local + kLocalSize + lname + lextra;
    if (m.compressed > d.offset - m.data_offset)
      throw Error(where + ": its " + std::to_string(m.compressed) + " compressed bytes at offset " +
                  std::to_string(m.data_offset) + " run past the " + std::to_string(d.offset) +
                  " bytes before the central directory (truncated archive or lying size)");
    if (m.method == 0 && m.compressed != m.uncompressed)
      throw Error(where + ": stored, yet its compressed size " + std::to_string(m.compressed) +
                  " is not its uncompressed size " + std::to_string(m.uncompressed));
    local_offsets.push_back(local);
    out.push_back(std::move(m));
  }
  if (at != d.end)
    throw Error(name + ": corrupt zip archive: " + std::to_string(d.end - at) +
                " bytes of its central directory after its last declared entry");
  // Members' data may not overlap (one way a small archive claims a huge content).
  std::vector<std::size_t> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return local_offsets[a] < local_offsets[b]; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const ZipMember& prev = out[order[k - 1]];
    if (prev.data_offset + prev.compressed > local_offsets[order[k]])
      throw Error(name + ": " + member_str(prev.name) + " and " + member_str(out[order[k]].name) +
                  ": their data overlap in the archive");
  }
  return out;
}

std::string zip_extract(std::string_view bytes, const ZipMember& m, const std::string& name) {
  const std::string where = name + ": " + member_str(m.name);
  if (m.data_offset > bytes.size() || m.compressed > bytes.size() - m.data_offset)
    throw Error(where + ": its data run past the end of the archive");
  const std::string_view in = bytes.substr(std::size_t(m.data_offset), std::size_t(m.compressed));
  if (m.method == 8 && m.uncompressed / kMaxDeflateRatio > m.compressed + 1024)
    throw Error(where + ": declares " + std::to_string(m.uncompressed) + " bytes from " + std::to_string(m.compressed) +
                " deflated bytes: more than 1,100-fold (deflate expands at most 1,032-fold; psi refuses more: a "
                "compression bomb or a corrupt archive)");
  const std::uint64_t memory = physical_memory_bytes();
  const auto too_large = [&] {
    return Error(where + ": declares " + std::to_string(m.uncompressed) + " bytes, more than this machine's memory (" +
                 std::to_string(memory) + " bytes) can hold");
  };
  if (m.uncompressed > memory || m.uncompressed > std::numeric_limits<std::size_t>::max() / 2) throw too_large();
  std::string out;
  try {
    out.resize(std::size_t(m.uncompressed));
  } catch (const std::bad_alloc&) {
    throw too_large();
  }
  // zlib counts in uInt: feed and drain at most 1 GiB a call.
  constexpr std::uint64_t kStep = std::uint64_t(1) << 30;
  if (m.method == 0) {
    std::copy(in.begin(), in.end(), out.begin());
  } else {
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw Error(where + ": zlib could not start inflating", Exit::run_failed);
    struct End {
      z_stream* z;
      ~End() { inflateEnd(z); }
    } end{&z};
    std::uint64_t in_at = 0, out_at = 0;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
      if (z.avail_in == 0 && in_at < in.size()) {
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_at));
        z.avail_in = uInt(std::min<std::uint64_t>(in.size() - in_at, kStep));
        in_at += z.avail_in;
      }
      // Past the declared size, a one-byte probe: a stream that still yields bytes lies.
      char probe = 0;
      const bool full = out_at == out.size();
      if (z.avail_out == 0) {
        z.next_out = full ? reinterpret_cast<Bytef*>(&probe) : reinterpret_cast<Bytef*>(out.data() + out_at);
        z.avail_out = full ? 1 : uInt(std::min<std::uint64_t>(out.size() - out_at, kStep));
      }
      const uInt before = z.avail_out;
      rc = inflate(&z, Z_NO_FLUSH);
      if (full && z.avail_out == 0)
        throw Error(where + ": inflates past the " + std::to_string(m.uncompressed) + " bytes its entry declares");
      if (!full) out_at += before - z.avail_out;
      if (full) z.avail_out = 0;
      if (rc == Z_DATA_ERROR)
        throw Error(where + ": corrupt deflate data (" + std::string(z.msg ? z.msg : "zlib gives no reason") + ")");
      if (rc == Z_MEM_ERROR) throw Error(where + ": zlib ran out of memory inflating it", Exit::run_failed);
      if (rc == Z_BUF_ERROR && z.avail_in == 0 && in_at == in.size())
        throw Error(where + ": its deflate stream ends early, after " + std::to_string(m.compressed) +
                    " compressed bytes (truncated or lying size)");
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        throw Error(where + ": inflate failed (zlib status " + std::to_string(rc) + ")");
    }
    if (out_at != m.uncompressed)
      throw Error(where + ": inflates to " + std::to_string(out_at) + " bytes, its entry declares " +
                  std::to_string(m.uncompressed));
    if (z.avail_in != 0 || in_at != in.size())
      throw Error(where + ": " + std::to_string(z.avail_in + in.size() - in_at) +
                  " bytes past the end of its deflate stream, within its declared compressed size");
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::uint64_t at = 0; at < out.size(); at += kStep)
    crc = crc32(crc, reinterpret_cast<const Bytef*>(out.data() + at), uInt(std::min<std::uint64_t>(out.size() - at, kStep)));
  if (crc != m.crc32)
    throw Error(where + ": CRC-32 mismatch: its bytes give " + std::to_string(crc) + ", its entry declares " +
                std::to_string(m.crc32) + " (corrupt archive)");
  return out;
}

}  // namespace psi
