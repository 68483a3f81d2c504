// The model store on a real tiny checkpoint (tandem testmodel's): names, import by copy and
// by reference, presets sharing weights, copy/remove with blob collection, a restart (a new
// store object over the same folder), corrupted and missing files refused by digest, and
// what a crash mid-write leaves behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "core/fs.h"
#include "core/paths.h"
#include "core/sha256.h"
#include "model/testmodel.h"
#include "store/model_store.h"
#include "store/model_store_create.h"
#include "store/model_store_import.h"
#include "store/model_store_io.h"

namespace fs = std::filesystem;

namespace tandem::store {
namespace {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("tandem-store-test-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// One tiny model folder for the whole suite (writing it takes a moment).
const fs::path& tiny_model() {
  static TempDir dir;
  static fs::path p = [] {
    auto tok = find_tokenizer_source();
    if (!tok) throw std::runtime_error("the Qwen3 tokenizer files were not found (make deps)");
    fs::path out = dir.path() / "tiny";
    model::write_test_model(out, model::test_model_preset("tiny"), 5, *tok);
    return out;
  }();
  return p;
}

void flip_byte(const fs::path& p, uint64_t at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(at));
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x5a);
  f.seekp(std::streamoff(at));
  f.write(&c, 1);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelName, ParseTable) {
  struct C {
    const char* in;
    const char* name;  // nullptr: invalid
    const char* tag;
  };
  const std::vector<C> cases = {
      {"qwen3", "qwen3", "latest"},
      {"qwen3:14b", "qwen3", "14b"},
      {"Qwen3-14B:q8_0", "Qwen3-14B", "q8_0"},
      {"library/qwen3:latest", "library/qwen3", "latest"},
      {"hf.co/Qwen/Qwen3-8B", "hf.co/Qwen/Qwen3-8B", "latest"},
      {"a:_x", "a", "_x"},
      {"", nullptr, nullptr},
      {":latest", nullptr, nullptr},
      {"qwen3:", nullptr, nullptr},
      {"qwen 3", nullptr, nullptr},
      {"-qwen", nullptr, nullptr},
      {"a//b", nullptr, nullptr},
      {"a/", nullptr, nullptr},
      {"q:t:u", nullptr, nullptr},
      {"q:-t", nullptr, nullptr},
      {"../etc", nullptr, nullptr},
      {"a/../b", nullptr, nullptr},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.in);
    auto n = try_parse_model_name(c.in);
    if (!c.name) {
      EXPECT_FALSE(n);
      EXPECT_THROW(parse_model_name(c.in), Error);
      continue;
    }
    ASSERT_TRUE(n);
    EXPECT_EQ(n->name, c.name);
    EXPECT_EQ(n->tag, c.tag);
  }
  EXPECT_TRUE(parse_model_name("QWEN3").same(parse_model_name("qwen3:latest")));
  EXPECT_EQ(parse_model_name("qwen3").shortest(), "qwen3");
  EXPECT_EQ(parse_model_name("qwen3:fast").shortest(), "qwen3:fast");
}

TEST(ModelStore, ImportCopyListShowRemoveAcrossRestarts) {
  TempDir root;
  const fs::path dir = root.path() / "models";
  std::string weights;
  {
    ModelStore s(dir);
    std::vector<ProgressEvent> events;
    ImportOptions io;
    io.progress = [&](const ProgressEvent& e) { events.push_back(e); };
    Manifest m = import_model(s, tiny_model(), parse_model_name("tiny"), io);
    EXPECT_EQ(m.mode, WeightsMode::kBlobs);
    EXPECT_TRUE(m.file("config.json") && m.file("model.safetensors") && m.file("tokenizer.json"));
    EXPECT_TRUE(m.file("generation_config.json") && m.file("tokenizer_config.json"));
    // Each digest is the SHA-256 of the source file.
    for (auto& f : m.files) {
      EXPECT_EQ(f.digest, "sha256:" + sha256_file_hex((tiny_model() / f.name).string())) << f.name;
      EXPECT_EQ(f.size, fs::file_size(tiny_model() / f.name));
      EXPECT_TRUE(s.blobs().has(f.digest));
    }
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().stage, "copying");
    EXPECT_EQ(events.back().done, events.back().total);
    EXPECT_EQ(m.details["family"], "qwen3");
    EXPECT_EQ(m.details["quantization_level"], "BF16");
    weights = m.weights_id();
    // The view: links named as the files, into blobs/, the same bytes.
    fs::path view = s.model_dir(m);
    EXPECT_TRUE(fs::is_symlink(view / "model.safetensors"));
    EXPECT_EQ(sha256_file_hex((view / "config.json").string()),
              sha256_file_hex((tiny_model() / "config.json").string()));
    s.copy("tiny", "tiny:copy");
  }
  {
    ModelStore s(dir);  // a restart: everything comes back from disk
    auto all = s.list();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].name.str(), "tiny:copy");
    EXPECT_EQ(all[1].name.str(), "tiny:latest");
    EXPECT_EQ(all[0].weights_id(), weights);
    EXPECT_TRUE(s.find("TINY"));  // names match without regard to case
    EXPECT_TRUE(s.find("tiny:latest"));
    EXPECT_FALSE(s.find("nope"));
    EXPECT_FALSE(s.find("bad name!"));
    EXPECT_NE(error_of([&] { s.get("nope"); }).find("model 'nope' not found"), std::string::npos);
    // Removing one keeps the blobs the other uses; removing the last frees them.
    s.remove("tiny");
    for (auto& f : all[0].files) EXPECT_TRUE(s.blobs().has(f.digest));
    s.remove("tiny:copy");
    for (auto& f : all[0].files) EXPECT_FALSE(s.blobs().has(f.digest));
    EXPECT_TRUE(s.list().empty());
    EXPECT_THROW(s.remove("tiny"), Error);
  }
}

TEST(ModelStore, CorruptedOrMissingBlobIsRefusedByDigest) {
  TempDir root;
  ModelStore s(root.path() / "models");
  Manifest m = import_model(s, tiny_model(), parse_model_name("tiny"));
  const StoredFile* w = m.file("model.safetensors");
  ASSERT_TRUE(w);
  const fs::path blob = s.blobs().path(w->digest);
  EXPECT_NO_THROW(s.model_dir(m));
  flip_byte(blob, w->size / 2);
  // A restart does not help: the digest is checked again because the file changed.
  ModelStore again(root.path() / "models");
  std::string err = error_of([&] { again.model_dir(again.get("tiny")); });
  EXPECT_NE(err.find("corrupted"), std::string::npos) << err;
  EXPECT_NE(err.find(w->digest), std::string::npos) << err;
  EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
  // Same size, same mtime restored: only a full check (show --verify) reads it again.
  flip_byte(blob, w->size / 2);  // the original bytes back
  EXPECT_NO_THROW(again.model_dir(again.get("tiny")));
  struct stat st {};
  ASSERT_EQ(::stat(blob.c_str(), &st), 0);
  flip_byte(blob, 100);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, blob.c_str(), times, 0), 0);  // the change hidden from stat
  EXPECT_NO_THROW(again.model_dir(again.get("tiny")));
  EXPECT_THROW(again.verify(again.get("tiny"), /*full=*/true), Error);
  flip_byte(blob, 100);
  EXPECT_NO_THROW(again.verify(again.get("tiny"), /*full=*/true));
  // A missing blob is named as missing.
  fs::remove(blob);
  err = error_of([&] { again.model_dir(again.get("tiny")); });
  EXPECT_NE(err.find("missing"), std::string::npos) << err;
}

TEST(ModelStore, ByReferenceNoticesAChangedFolder) {
  TempDir root;
  fs::path folder = root.path() / "weights";
  fs::copy(tiny_model(), folder);
  ModelStore s(root.path() / "models");
  ImportOptions io;
  io.link = true;
  Manifest m = import_model(s, folder, parse_model_name("ref"), io);
  EXPECT_EQ(m.mode, WeightsMode::kReference);
  EXPECT_EQ(fs::path(m.folder), fs::canonical(folder));
  EXPECT_TRUE(s.blobs().list().empty());  // nothing copied
  EXPECT_EQ(s.model_dir(m), fs::canonical(folder));
  flip_byte(folder / "config.json", 3);
  std::string err = error_of([&] { s.model_dir(s.get("ref")); });
  EXPECT_NE(err.find("config.json is corrupted"), std::string::npos) << err;
  fs::remove(folder / "config.json");
  err = error_of([&] { s.model_dir(s.get("ref")); });
  EXPECT_NE(err.find("missing"), std::string::npos) << err;
  // The store refuses to import a folder that is not a servable model, before copying.
  fs::path junk = root.path() / "junk";
  fs::create_directories(junk);
  write_file(junk / "config.json", "{}");
  err = error_of([&] { import_model(s, junk, parse_model_name("junk")); });
  EXPECT_NE(err.find("not a model tandem can serve"), std::string::npos) << err;
  EXPECT_FALSE(s.find("junk"));
}

TEST(ModelStore, PresetsFromAModelfileShareTheWeights) {
  TempDir root;
  ModelStore s(root.path() / "models");
  Manifest base = import_model(s, tiny_model(), parse_model_name("tiny"));
  auto mf = parse_modelfile(
      "FROM tiny\nPARAMETER temperature 0.2\nPARAMETER stop END\nSYSTEM Be brief.\n"
      "MESSAGE user Hi\nMESSAGE assistant Hello!\nLICENSE MIT\n");
  std::vector<std::string> status;
  Manifest fast = create_model(s, spec_from_modelfile(mf, parse_model_name("tiny:fast"), "."),
                               [&](const std::string& st) { status.push_back(st); });
  EXPECT_EQ(fast.weights_id(), base.weights_id());
  EXPECT_EQ(fast.parent, "tiny:latest");
  EXPECT_EQ(fast.parameters.dump(), R"({"temperature":0.2,"stop":["END"]})");
  EXPECT_EQ(*fast.system, "Be brief.");
  ASSERT_EQ(fast.messages.size(), 2u);
  EXPECT_EQ(status.front(), "using model tiny");
  EXPECT_EQ(status.back(), "writing manifest");
  // A preset of the preset: parameters layer by name, the rest is inherited.
  auto mf2 = parse_modelfile("FROM tiny:fast\nPARAMETER temperature 0.9\nPARAMETER top_k 5\n");
  Manifest warm = create_model(s, spec_from_modelfile(mf2, parse_model_name("tiny:warm"), "."));
  EXPECT_EQ(warm.parameters.dump(), R"({"temperature":0.9,"stop":["END"],"top_k":5})");
  EXPECT_EQ(*warm.system, "Be brief.");
  EXPECT_EQ(warm.license, std::vector<std::string>{"MIT"});
  EXPECT_EQ(warm.weights_id(), base.weights_id());
  // FROM a folder imports it; FROM nothing is refused.
  auto mf3 = parse_modelfile("FROM " + tiny_model().string() + "\nPARAMETER seed 4\n");
  Manifest fromdir = create_model(s, spec_from_modelfile(mf3, parse_model_name("dir"), "."));
  EXPECT_EQ(fromdir.weights_id(), base.weights_id());  // same bytes, same blobs
  auto none = parse_modelfile("FROM ghost\n");
  std::string err =
      error_of([&] { create_model(s, spec_from_modelfile(none, parse_model_name("x"), ".")); });
  EXPECT_NE(err.find("FROM ghost: no model of that name"), std::string::npos) << err;
  auto nodir = parse_modelfile("FROM ./no/such/folder\n");
  err = error_of([&] { create_model(s, spec_from_modelfile(nodir, parse_model_name("x"), ".")); });
  EXPECT_NE(err.find("no such folder"), std::string::npos) << err;
  // The Modelfile `show` writes makes the same model again.
  const std::string text = modelfile_text(warm, s.model_dir(warm));
  auto again = parse_modelfile(text);
  Manifest copy = create_model(s, spec_from_modelfile(again, parse_model_name("tiny:again"), "."));
  EXPECT_EQ(copy.weights_id(), warm.weights_id());
  EXPECT_EQ(copy.parameters, warm.parameters);
  EXPECT_EQ(copy.system, warm.system);
  EXPECT_EQ(copy.messages, warm.messages);
  EXPECT_EQ(copy.license, warm.license);
}

TEST(ModelStore, CreateFromUploadedBlobs) {
  TempDir root;
  ModelStore s(root.path() / "models");
  std::map<std::string, std::string> files;
  for (auto& p : model_files(tiny_model())) {
    BlobWriter w(s.blobs());
    std::string data = read_file(p);
    w.write(data.data(), data.size());
    files[p.filename().string()] = w.commit("sha256:" + sha256_hex(data));
  }
  CreateSpec spec;
  spec.name = parse_model_name("uploaded");
  spec.files = files;
  spec.system = "S";
  Manifest m = create_model(s, spec);
  EXPECT_EQ(m.files.size(), files.size());
  EXPECT_EQ(m.details["family"], "qwen3");
  EXPECT_NO_THROW(s.model_dir(m));
  // A missing blob and a bad file name are refused.
  auto bad = files;
  bad["model.safetensors"] = "sha256:" + std::string(64, 'a');
  spec.files = bad;
  EXPECT_NE(error_of([&] { create_model(s, spec); }).find("upload it first"), std::string::npos);
  bad = files;
  bad["../x.json"] = files["config.json"];
  spec.files = bad;
  EXPECT_NE(error_of([&] { create_model(s, spec); }).find("file name"), std::string::npos);
}

TEST(BlobStore, WrongDigestPublishesNothing) {
  TempDir root;
  BlobStore b(root.path());
  const std::string data = "hello blobs";
  {
    BlobWriter w(b);
    w.write(data.data(), data.size());
    std::string err = error_of([&] { w.commit("sha256:" + std::string(64, '0')); });
    EXPECT_NE(err.find("does not match its digest"), std::string::npos) << err;
  }
  EXPECT_TRUE(b.list().empty());
  size_t left = 0;
  for (auto& e : fs::directory_iterator(b.dir())) left += e.path().filename() != "" ? 1 : 0;
  EXPECT_EQ(left, 0u);  // the temporary file is gone too
  EXPECT_THROW(normalize_digest("sha256:ABC"), Error);
  EXPECT_EQ(normalize_digest("sha256-" + sha256_hex(data)), "sha256:" + sha256_hex(data));
}

TEST(ModelStore, WhatACrashLeavesBehindIsHarmless) {
  TempDir root;
  ModelStore s(root.path() / "models");
  import_model(s, tiny_model(), parse_model_name("tiny"));
  // A manifest write that died before its rename, and a blob copy that died mid-way.
  write_file(root.path() / "models" / "manifests" / ".other@latest.json.tmp-0000000000000001",
             "{\"schema\": 1, \"na");
  const fs::path stale = s.blobs().dir() / ".tmp-00000000dead0000";
  write_file(stale, "half a blob");
  // Its writer is gone (no lock held); make it look older than a live writer's file.
  auto old = fs::last_write_time(stale) - std::chrono::hours(2);
  fs::last_write_time(stale, old);
  ModelStore again(root.path() / "models");
  auto all = again.list();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name.str(), "tiny:latest");
  EXPECT_NO_THROW(again.model_dir(all[0]));
  again.blobs().sweep_temp();
  EXPECT_FALSE(fs::exists(stale));
  // A live writer's file survives a sweep.
  {
    BlobWriter w(again.blobs());
    w.write("x", 1);
    for (auto& e : fs::directory_iterator(again.blobs().dir()))
      if (e.path().filename().string().rfind(".tmp-", 0) == 0) fs::last_write_time(e.path(), old);
    again.blobs().sweep_temp();
    EXPECT_NO_THROW(w.commit());
  }
  // A manifest replaced while readers read it: readers see the old or the new file whole.
  Manifest m = again.get("tiny");
  m.system = "new";
  again.put(m);
  EXPECT_EQ(*again.get("tiny").system, "new");
}

}  // namespace
}  // namespace tandem::store
