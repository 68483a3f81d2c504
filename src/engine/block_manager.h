#pragma once
// Paged KV block manager with automatic prefix caching.
//
// The runner owns num_blocks blocks of block_size token slots; this class decides which
// sequence owns which block. Blocks are reference counted: a block is shared by every
// sequence whose prefix it holds (prefix-cache hits, forked samples of one request).
//
// Prefix cache: once every token of a full block has K/V in the cache, the block is
// registered under a hash of its tokens chained to the hash of the block before it, so
// one hash names a whole prefix. A new sequence looks its full prompt blocks up in order
// and stops at the first miss; a hit is confirmed by comparing the tokens. A block whose
// last user releases it keeps its hash and contents and joins the free list at the tail;
// allocation takes from the head, so cached blocks are reused least recently freed first
// (blocks without a hash go to the head: they hold nothing worth keeping).
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace tandem::engine {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool enable_prefix_caching);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int num_free() const { return num_free_; }  // blocks with no user (cached or empty)
  int num_used() const { return num_blocks_ - num_free_; }
  int num_cached() const { return int(cache_.size()); }  // blocks findable by hash
  int ref_count(BlockId b) const { return ref_[size_t(b)]; }
  bool caching() const { return caching_; }

  int blocks_for(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // The leading full blocks of seq.tokens found in the cache, at most (num_tokens-1)/bs of
  // them so that at least one token is left to compute. No state changes.
  void lookup_prefix(const Sequence& seq, std::vector<BlockId>& out) const;
  // How many of `blocks` currently have no user (claiming them takes them off the free list).
  int count_free(std::span<const BlockId> blocks) const;
  // Gives a sequence without blocks the looked-up prefix: blocks, num_computed, hash chain.
  void claim_prefix(Sequence& seq, std::span<const BlockId> prefix);

  // New blocks needed for seq.blocks to cover positions [0, tokens).
  int blocks_needed(const Sequence& seq, int tokens) const;
  // Allocates them; requires num_free() >= blocks_needed(seq, tokens).
  void grow(Sequence& seq, int tokens);
  // Registers the sequence's full blocks whose tokens are all computed (call after a step).
  void commit(Sequence& seq);
  // Shares the first `nblocks` blocks of `parent` with `child`, which has none.
  void fork(const Sequence& parent, Sequence& child, int nblocks);
  // Drops every block of seq (last block first, so a prefix outlives its tail in the LRU).
  void release(Sequence& seq);

  // Throws Error(kInternal) on any broken invariant: free list vs. ref counts, cache map vs.
  // block hashes. For tests; O(num_blocks).
  void check_invariants() const;

 private:
  BlockId take_free();  // head of the free list; evicts its cache entry
  void unlink(BlockId b);
  void push_head(BlockId b);
  void push_tail(BlockId b);
  uint64_t hash_block(uint64_t parent, const TokenId* toks) const;

  int num_blocks_, block_size_;
  bool caching_;
  int num_free_ = 0;
  std::vector<int32_t> ref_;
  std::vector<uint8_t> hashed_;  // block is the cache entry for hash_[b]
  std::vector<uint64_t> hash_;
  std::vector<TokenId> contents_;     // [num_blocks, block_size] tokens of hashed blocks
  std::vector<BlockId> prev_, next_;  // free list, doubly linked through sentinel num_blocks
  std::unordered_map<uint64_t, BlockId> cache_;
};

}  // namespace tandem::engine
