// Block manager: prefix-cache hits and LRU eviction, and random operation sequences
// checked against a model of who holds which block.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "engine/block_manager.h"

namespace tandem::engine {
namespace {

std::vector<TokenId> random_tokens(std::mt19937& g, int n, int vocab = 1000) {
  std::uniform_int_distribution<int> d(0, vocab - 1);
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(g);
  return t;
}

// Computes all of seq's tokens (as if a step ran them) and registers its full blocks.
void compute_all(BlockManager& bm, Sequence& s) {
  bm.grow(s, s.num_tokens());
  s.num_computed = s.num_tokens();
  bm.commit(s);
}

Sequence make_seq(std::vector<TokenId> toks) {
  Sequence s;
  s.tokens = std::move(toks);
  s.num_prompt = s.num_tokens();
  return s;
}

TEST(BlockManager, PrefixHitSharesComputedFullBlocksOnly) {
  std::mt19937 g(7);
  BlockManager bm(20, 16, true);
  auto prompt = random_tokens(g, 53);  // 3 full blocks + 5
  Sequence a = make_seq(prompt);
  std::vector<BlockId> hit;
  bm.lookup_prefix(a, hit);
  EXPECT_TRUE(hit.empty());
  compute_all(bm, a);
  EXPECT_EQ(bm.num_used(), 4);
  EXPECT_EQ(bm.num_cached(), 3);  // the partial block is not cacheable

  // Same prompt with a different tail: the 3 full blocks hit and are shared.
  auto p2 = prompt;
  p2.resize(48);
  auto tail = random_tokens(g, 30);
  p2.insert(p2.end(), tail.begin(), tail.end());
  Sequence b = make_seq(p2);
  bm.lookup_prefix(b, hit);
  ASSERT_EQ(hit.size(), 3u);
  EXPECT_EQ(bm.count_free(hit), 0);
  bm.claim_prefix(b, hit);
  EXPECT_EQ(b.num_computed, 48);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bm.ref_count(a.blocks[size_t(i)]), 2);
  compute_all(bm, b);
  bm.check_invariants();

  // A change inside block 1 stops the match after block 0.
  auto p3 = prompt;
  p3[20] = (p3[20] + 1) % 1000;
  Sequence c = make_seq(p3);
  bm.lookup_prefix(c, hit);
  EXPECT_EQ(hit.size(), 1u);

  // An exact-multiple prompt keeps its last block to compute (logits need one token).
  auto p4 = prompt;
  p4.resize(48);
  Sequence d = make_seq(p4);
  bm.lookup_prefix(d, hit);
  EXPECT_EQ(hit.size(), 2u);

  bm.release(a);
  bm.release(b);
  bm.check_invariants();
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_cached(), 4);  // a's 3 + b's block 3 (b's block 4 is partial)
  // Cached blocks survive release and hit again (and come off the free list when claimed).
  Sequence e = make_seq(prompt);
  bm.lookup_prefix(e, hit);
  ASSERT_EQ(hit.size(), 3u);
  EXPECT_EQ(bm.count_free(hit), 3);
  bm.claim_prefix(e, hit);
  EXPECT_EQ(bm.num_free(), 17);
  bm.release(e);
  bm.check_invariants();
}

TEST(BlockManager, EvictsLeastRecentlyFreedFirst) {
  std::mt19937 g(11);
  const int bs = 16;
  BlockManager bm(6, bs, true);
  Sequence a = make_seq(random_tokens(g, 2 * bs + 1));
  Sequence b = make_seq(random_tokens(g, 2 * bs + 1));
  compute_all(bm, a);  // 3 blocks, 2 cached
  compute_all(bm, b);  // 3 blocks, 2 cached
  auto a_toks = a.tokens, b_toks = b.tokens;
  bm.release(a);  // a's blocks freed first: least recently freed
  bm.release(b);
  EXPECT_EQ(bm.num_cached(), 4);
  // A new 2-block sequence takes the 2 uncached partial blocks first, then evicts a's.
  Sequence c = make_seq(random_tokens(g, 4 * bs));
  bm.grow(c, 4 * bs);
  EXPECT_EQ(bm.num_cached(), 2);
  std::vector<BlockId> hit;
  Sequence a2 = make_seq(a_toks), b2 = make_seq(b_toks);
  bm.lookup_prefix(a2, hit);
  EXPECT_EQ(hit.size(), 0u);  // a was evicted
  bm.lookup_prefix(b2, hit);
  EXPECT_EQ(hit.size(), 2u);  // b survived
  bm.release(c);
  bm.check_invariants();
}

TEST(BlockManager, EvictsTailBeforeItsPrefix) {
  std::mt19937 g(5);
  const int bs = 16;
  BlockManager bm(4, bs, true);
  Sequence a = make_seq(random_tokens(g, 3 * bs + 1));
  compute_all(bm, a);
  auto toks = a.tokens;
  bm.release(a);  // blocks 2, 1, 0 freed in that order: block 0 is kept longest
  Sequence c = make_seq(random_tokens(g, 2 * bs));
  bm.grow(c, 2 * bs);  // the uncached partial block, then a's block 2
  Sequence a2 = make_seq(toks);
  std::vector<BlockId> hit;
  bm.lookup_prefix(a2, hit);
  EXPECT_EQ(hit.size(), 2u);
  bm.release(c);
}

TEST(BlockManager, DisabledCachingNeverHits) {
  std::mt19937 g(3);
  BlockManager bm(10, 16, false);
  Sequence a = make_seq(random_tokens(g, 40));
  compute_all(bm, a);
  Sequence b = make_seq(a.tokens);
  std::vector<BlockId> hit;
  bm.lookup_prefix(b, hit);
  EXPECT_TRUE(hit.empty());
  bm.release(a);
  EXPECT_EQ(bm.num_free(), 10);
}

TEST(BlockManager, ForkSharesBlocksUntilAllRelease) {
  std::mt19937 g(9);
  BlockManager bm(12, 16, true);
  Sequence p = make_seq(random_tokens(g, 50));
  compute_all(bm, p);
  Sequence c1, c2;
  c1.tokens = c2.tokens = p.tokens;
  bm.fork(p, c1, 3);
  bm.fork(p, c2, 3);
  EXPECT_EQ(bm.ref_count(p.blocks[0]), 3);
  EXPECT_EQ(bm.ref_count(p.blocks[3]), 1);  // the partial block stays the parent's
  c1.num_computed = 48;
  c1.tokens.push_back(1);
  compute_all(bm, c1);  // recomputes its own tail into a new block
  EXPECT_NE(c1.blocks[3], p.blocks[3]);
  bm.release(p);
  bm.release(c1);
  EXPECT_EQ(bm.ref_count(c2.blocks[0]), 1);
  bm.release(c2);
  EXPECT_EQ(bm.num_used(), 0);
  bm.check_invariants();
}

// Random grow/commit/fork/release/claim sequences against a model of the holders: no
// leak, no double free, the ref count of each block equals the number of holders.
TEST(BlockManager, RandomOperationsKeepInvariants) {
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 g{uint32_t(seed)};
    const int bs = seed % 2 ? 16 : 32, nblocks = 40 + seed;
    BlockManager bm(nblocks, bs, seed % 5 != 0);
    // A few shared prefixes so the cache is exercised.
    std::vector<std::vector<TokenId>> prefixes;
    for (int i = 0; i < 3; ++i) prefixes.push_back(random_tokens(g, bs * (1 + i) + i, 50));
    std::vector<std::unique_ptr<Sequence>> live;
    // What each block slot holds, written as sequences compute (the KV cache's contents).
    std::vector<TokenId> kv(size_t(nblocks) * size_t(bs), -1);
    auto compute = [&](Sequence& s) {
      const int from = s.num_computed;
      bm.grow(s, s.num_tokens());
      for (int p = from; p < s.num_tokens(); ++p)
        kv[size_t(s.blocks[size_t(p / bs)]) * size_t(bs) + size_t(p % bs)] = s.tokens[size_t(p)];
      s.num_computed = s.num_tokens();
      bm.commit(s);
    };
    for (int op = 0; op < 400; ++op) {
      const int kind = int(g() % 4);
      if (kind == 0 || live.empty()) {  // new sequence, maybe from a cached prefix
        auto toks = prefixes[g() % prefixes.size()];
        auto more = random_tokens(g, int(g() % (3 * bs)) + 1, 50);
        toks.insert(toks.end(), more.begin(), more.end());
        auto s = std::make_unique<Sequence>(make_seq(toks));
        std::vector<BlockId> hit;
        bm.lookup_prefix(*s, hit);
        for (size_t i = 0; i < hit.size(); ++i)  // a hit holds exactly those tokens
          ASSERT_TRUE(std::equal(s->tokens.begin() + ptrdiff_t(i) * bs,
                                 s->tokens.begin() + ptrdiff_t(i + 1) * bs,
                                 kv.begin() + ptrdiff_t(hit[i]) * bs))
              << "seed " << seed << " op " << op;
        const int need = bm.blocks_for(s->num_tokens()) - int(hit.size()) + bm.count_free(hit);
        if (need > bm.num_free()) continue;
        bm.claim_prefix(*s, hit);
        compute(*s);
        live.push_back(std::move(s));
      } else if (kind == 1) {  // decode some tokens
        Sequence& s = *live[g() % live.size()];
        const int add = int(g() % bs) + 1;
        if (bm.blocks_needed(s, s.num_tokens() + add) > bm.num_free()) continue;
        auto more = random_tokens(g, add, 50);
        s.tokens.insert(s.tokens.end(), more.begin(), more.end());
        compute(s);
      } else if (kind == 2) {  // fork
        Sequence& p = *live[g() % live.size()];
        auto c = std::make_unique<Sequence>(make_seq(p.tokens));
        const int full = p.num_computed / bs;
        bm.fork(p, *c, full);
        c->num_computed = full * bs;
        if (bm.blocks_needed(*c, c->num_tokens()) > bm.num_free()) {
          bm.release(*c);
          continue;
        }
        compute(*c);
        live.push_back(std::move(c));
      } else {  // release (finish, cancel or preempt)
        const size_t i = g() % live.size();
        bm.release(*live[i]);
        live.erase(live.begin() + ptrdiff_t(i));
      }
      std::map<BlockId, int> holders;
      for (auto& s : live)
        for (BlockId b : s->blocks) ++holders[b];
      for (BlockId b = 0; b < nblocks; ++b) {
        auto it = holders.find(b);
        ASSERT_EQ(bm.ref_count(b), it == holders.end() ? 0 : it->second) << "seed " << seed;
      }
      ASSERT_NO_THROW(bm.check_invariants());
    }
    for (auto& s : live) bm.release(*s);
    EXPECT_EQ(bm.num_free(), nblocks);
    EXPECT_NO_THROW(bm.check_invariants());
  }
}

}  // namespace
}  // namespace tandem::engine
