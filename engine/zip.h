#pragma once
// Zip archives as numpy.savez and numpy.savez_compressed write them (and PyTorch's torch.save,
// which psi only recognises to refuse): the central directory found from the end record (ZIP64
// included), each member stored or deflated, every offset, size and CRC-32 checked against the
// archive before a byte is used. Members are read whole into memory, each bounded by its
// declared size, by deflate's largest expansion and by this machine's memory.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace psi {

struct ZipMember {
  std::string name;             // as the archive spells it ('/' separating folders)
  std::uint16_t method = 0;     // 0 stored, 8 deflate (no other is accepted)
  std::uint32_t crc32 = 0;      // of the uncompressed bytes
  std::uint64_t compressed = 0;    // bytes in the archive
  std::uint64_t uncompressed = 0;  // bytes once inflated
  std::uint64_t data_offset = 0;   // where its (compressed) bytes begin, past the local header
};

// The members of the archive `bytes` (`name` for the messages), in central-directory order.
// A truncated archive, a directory or local header out of range or disagreeing with the other,
// a multi-disk or encrypted archive, a compression method other than stored and deflate,
// members whose data overlap, or a name given twice is a psi::Error (exit 2) naming the archive,
// the member where there is one, and the cause.
std::vector<ZipMember> zip_members(std::string_view bytes, const std::string& name);

// The member's uncompressed bytes, checked against its declared size and CRC-32; a deflate
// stream that is corrupt, ends early, inflates past its declared size or expands more than
// deflate can, or a size past this machine's memory, is a psi::Error naming archive and member.
std::string zip_extract(std::string_view bytes, const ZipMember& m, const std::string& name);

}  // namespace psi
