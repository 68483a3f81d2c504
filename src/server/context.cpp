#include "server/context.h"

namespace tandem::server {

bool ServerContext::serves(const std::string& name) const {
  std::string base = name;
  if (base.size() > 7 && base.compare(base.size() - 7, 7, ":latest") == 0)
    base.resize(base.size() - 7);
  for (auto& n : model.names)
    if (n == name || n == base) return true;
  return false;
}

namespace {
class EngineGenerator : public Generator {
 public:
  explicit EngineGenerator(std::unique_ptr<engine::Engine> e) : e_(std::move(e)) {}
  std::shared_ptr<engine::RequestHandle> submit(engine::Request r) override {
    return e_->submit(std::move(r));
  }
  void cancel(engine::RequestId id) override { e_->cancel(id); }
  int max_model_len() const override { return e_->max_model_len(); }
  engine::EngineStats stats() const override { return e_->stats(); }

 private:
  std::unique_ptr<engine::Engine> e_;
};
}  // namespace

std::unique_ptr<Generator> wrap_engine(std::unique_ptr<engine::Engine> e) {
  return std::make_unique<EngineGenerator>(std::move(e));
}

}  // namespace tandem::server
