#include "engine/block_manager.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace tandem::engine {

namespace {
uint64_t mix(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : num_blocks_(num_blocks), block_size_(block_size), caching_(enable_prefix_caching) {
  if (num_blocks < 1) fail(ErrorKind::kInvalidArgument, "KV cache has no blocks");
  if (block_size < 1) fail(ErrorKind::kInvalidArgument, "block size {} < 1", block_size);
  ref_.assign(size_t(num_blocks), 0);
  hashed_.assign(size_t(num_blocks), 0);
  hash_.assign(size_t(num_blocks), 0);
  if (caching_) contents_.assign(size_t(num_blocks) * size_t(block_size), 0);
  prev_.assign(size_t(num_blocks) + 1, num_blocks);
  next_.assign(size_t(num_blocks) + 1, num_blocks);
  for (BlockId b = 0; b < num_blocks; ++b) push_tail(b);
}

uint64_t BlockManager::hash_block(uint64_t parent, const TokenId* toks) const {
  uint64_t h = mix(parent + 0x9e3779b97f4a7c15ull);
  for (int i = 0; i < block_size_; ++i)
    h = mix(h ^ (uint64_t(uint32_t(toks[i])) + uint64_t(i) * 0x100000001b3ull));
  return h;
}

void BlockManager::unlink(BlockId b) {
  next_[size_t(prev_[size_t(b)])] = next_[size_t(b)];
  prev_[size_t(next_[size_t(b)])] = prev_[size_t(b)];
  prev_[size_t(b)] = next_[size_t(b)] = -1;
  --num_free_;
}

void BlockManager::push_head(BlockId b) {
  const BlockId s = num_blocks_;
  next_[size_t(b)] = next_[size_t(s)];
  prev_[size_t(b)] = s;
  prev_[size_t(next_[size_t(s)])] = b;
  next_[size_t(s)] = b;
  ++num_free_;
}

void BlockManager::push_tail(BlockId b) {
  const BlockId s = num_blocks_;
  prev_[size_t(b)] = prev_[size_t(s)];
  next_[size_t(b)] = s;
  next_[size_t(prev_[size_t(s)])] = b;
  prev_[size_t(s)] = b;
  ++num_free_;
}

BlockId BlockManager::take_free() {
  TANDEM_CHECK(num_free_ > 0);
  const BlockId b = next_[size_t(num_blocks_)];
  unlink(b);
  if (hashed_[size_t(b)]) {  // evict: the block's old prefix is no longer findable
    cache_.erase(hash_[size_t(b)]);
    hashed_[size_t(b)] = 0;
  }
  ref_[size_t(b)] = 1;
  return b;
}

void BlockManager::lookup_prefix(const Sequence& seq, std::vector<BlockId>& out) const {
  out.clear();
  if (!caching_ || seq.num_tokens() < 2) return;
  const int max_blocks = (seq.num_tokens() - 1) / block_size_;
  uint64_t h = 0;
  for (int i = 0; i < max_blocks; ++i) {
    const TokenId* toks = seq.tokens.data() + size_t(i) * size_t(block_size_);
    h = hash_block(h, toks);
    auto it = cache_.find(h);
    if (it == cache_.end()) break;
    const BlockId b = it->second;
    if (std::memcmp(&contents_[size_t(b) * size_t(block_size_)], toks,
                    sizeof(TokenId) * size_t(block_size_)) != 0)
      break;  // a hash collision: treat as a miss
    out.push_back(b);
  }
}

int BlockManager::count_free(std::span<const BlockId> blocks) const {
  int n = 0;
  for (BlockId b : blocks) n += ref_[size_t(b)] == 0;
  return n;
}

void BlockManager::claim_prefix(Sequence& seq, std::span<const BlockId> prefix) {
  TANDEM_CHECK(seq.blocks.empty());
  for (BlockId b : prefix) {
    if (ref_[size_t(b)] == 0) unlink(b);
    ++ref_[size_t(b)];
    seq.blocks.push_back(b);
  }
  seq.num_computed = int(prefix.size()) * block_size_;
  seq.num_hashed_blocks = int(prefix.size());
  seq.last_hash = prefix.empty() ? 0 : hash_[size_t(prefix.back())];
}

int BlockManager::blocks_needed(const Sequence& seq, int tokens) const {
  return std::max(0, blocks_for(tokens) - int(seq.blocks.size()));
}

void BlockManager::grow(Sequence& seq, int tokens) {
  const int need = blocks_needed(seq, tokens);
  TANDEM_CHECK(need <= num_free_);
  for (int i = 0; i < need; ++i) seq.blocks.push_back(take_free());
}

void BlockManager::commit(Sequence& seq) {
  if (!caching_) return;
  const int full = seq.num_computed / block_size_;
  for (int i = seq.num_hashed_blocks; i < full; ++i) {
    const TokenId* toks = seq.tokens.data() + size_t(i) * size_t(block_size_);
    const uint64_t h = hash_block(seq.last_hash, toks);
    const BlockId b = seq.blocks[size_t(i)];
    if (!hashed_[size_t(b)] && !cache_.contains(h)) {
      // First holder of this prefix: make it findable. (When another block already holds
      // the same prefix, computed in the same step by an identical prompt, keep that one.)
      cache_.emplace(h, b);
      hashed_[size_t(b)] = 1;
      hash_[size_t(b)] = h;
      std::memcpy(&contents_[size_t(b) * size_t(block_size_)], toks,
                  sizeof(TokenId) * size_t(block_size_));
    }
    seq.last_hash = h;
  }
  seq.num_hashed_blocks = std::max(seq.num_hashed_blocks, full);
}

void BlockManager::fork(const Sequence& parent, Sequence& child, int nblocks) {
  TANDEM_CHECK(child.blocks.empty() && nblocks <= int(parent.blocks.size()));
  for (int i = 0; i < nblocks; ++i) {
    const BlockId b = parent.blocks[size_t(i)];
    TANDEM_CHECK(ref_[size_t(b)] > 0);
    ++ref_[size_t(b)];
    child.blocks.push_back(b);
  }
  // The child re-derives its hash chain on its first commit (shared blocks are skipped).
  child.num_hashed_blocks = 0;
  child.last_hash = 0;
}

void BlockManager::release(Sequence& seq) {
  for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) {
    const BlockId b = *it;
    TANDEM_CHECK(ref_[size_t(b)] > 0);
    if (--ref_[size_t(b)] == 0) {
      if (hashed_[size_t(b)])
        push_tail(b);
      else
        push_head(b);
    }
  }
  seq.blocks.clear();
  seq.num_computed = 0;
  seq.num_hashed_blocks = 0;
  seq.last_hash = 0;
}

void BlockManager::check_invariants() const {
  int free_in_list = 0;
  std::vector<uint8_t> seen(size_t(num_blocks_), 0);
  for (BlockId b = next_[size_t(num_blocks_)]; b != num_blocks_; b = next_[size_t(b)]) {
    TANDEM_CHECK(b >= 0 && b < num_blocks_);
    TANDEM_CHECK(!seen[size_t(b)]);  // a cycle or a double free
    seen[size_t(b)] = 1;
    TANDEM_CHECK(ref_[size_t(b)] == 0);
    TANDEM_CHECK(prev_[size_t(next_[size_t(b)])] == b);
    ++free_in_list;
  }
  TANDEM_CHECK(free_in_list == num_free_);
  for (BlockId b = 0; b < num_blocks_; ++b) {
    TANDEM_CHECK(ref_[size_t(b)] >= 0);
    TANDEM_CHECK((ref_[size_t(b)] == 0) == bool(seen[size_t(b)]));
    if (hashed_[size_t(b)]) {
      auto it = cache_.find(hash_[size_t(b)]);
      TANDEM_CHECK(it != cache_.end() && it->second == b);
    }
  }
  for (const auto& [h, b] : cache_) TANDEM_CHECK(hashed_[size_t(b)] && hash_[size_t(b)] == h);
}

}  // namespace tandem::engine
