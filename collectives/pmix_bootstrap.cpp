// The PMIx bootstrap (adapter over the OpenPMIx client): under `srun --mpi=pmix` or Open MPI's
// mpirun, each rank puts its value under a key of this round, commits, fences with data
// collection (with a timeout) and gets every rank's value.
#include <pmix.h>

#include <cstring>
#include <string>
#include <vector>

#include "primus/collectives/bootstrap.hpp"
#include "primus/collectives/error.hpp"

namespace primus::coll {
namespace {

std::string pmix_text(pmix_status_t status) {
  return PMIx_Error_string(status);
}

// One PMIx client session: PMIx_Init in the constructor, PMIx_Finalize in the destructor.
class PmixSession {
 public:
  PmixSession() {
    const pmix_status_t rc = PMIx_Init(&self_, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
      throw CollectiveError("PMIx: cannot connect to the PMIx server (" + pmix_text(rc) +
                            "): run under srun --mpi=pmix or mpirun, or set "
                            "PRIMUS_BOOTSTRAP=tcp");
    }
  }
  ~PmixSession() { PMIx_Finalize(nullptr, 0); }
  PmixSession(const PmixSession&) = delete;
  PmixSession& operator=(const PmixSession&) = delete;

  const pmix_proc_t& self() const { return self_; }

 private:
  pmix_proc_t self_{};
};

class PmixValue {  // owns what PMIx_Get returns
 public:
  PmixValue() = default;
  ~PmixValue() {
    if (value_ != nullptr) PMIX_VALUE_RELEASE(value_);
  }
  PmixValue(const PmixValue&) = delete;
  PmixValue& operator=(const PmixValue&) = delete;
  pmix_value_t** out() { return &value_; }
  const pmix_value_t* get() const { return value_; }

 private:
  pmix_value_t* value_ = nullptr;
};

class PmixBootstrap final : public Bootstrap {
 public:
  explicit PmixBootstrap(std::string local_address) : local_address_(std::move(local_address)) {
    pmix_proc_t job{};
    PMIX_LOAD_PROCID(&job, session_.self().nspace, PMIX_RANK_WILDCARD);
    PmixValue value;
    const pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, value.out());
    if (rc != PMIX_SUCCESS || value.get() == nullptr || value.get()->type != PMIX_UINT32) {
      throw CollectiveError("PMIx: cannot get the job size (" + pmix_text(rc) + ")");
    }
    size_ = static_cast<int>(value.get()->data.uint32);
    rank_ = static_cast<int>(session_.self().rank);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string local_address() const override { return local_address_; }

  std::vector<std::string> allgather(const std::string& mine,
                                     std::chrono::milliseconds timeout) override {
    const std::string key = "primus.allgather." + std::to_string(round_++);
    pmix_value_t value{};
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = const_cast<char*>(mine.data());  // PMIx_Put copies it
    value.data.bo.size = mine.size();
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    if (rc != PMIX_SUCCESS) throw CollectiveError("PMIx_Put " + key + ": " + pmix_text(rc));
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) throw CollectiveError("PMIx_Commit: " + pmix_text(rc));

    pmix_proc_t everyone{};
    PMIX_LOAD_PROCID(&everyone, session_.self().nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info[2];
    bool collect = true;
    int seconds = static_cast<int>(std::max<long long>(1, (timeout.count() + 999) / 1000));
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
    rc = PMIx_Fence(&everyone, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
      throw CollectiveError("PMIx_Fence: " + pmix_text(rc) +
                            (rc == PMIX_ERR_TIMEOUT ? " (a rank did not arrive within " +
                                                          std::to_string(seconds) + " s)"
                                                    : std::string()));
    }
    std::vector<std::string> all(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      pmix_proc_t proc{};
      PMIX_LOAD_PROCID(&proc, session_.self().nspace, static_cast<pmix_rank_t>(r));
      PmixValue got;
      // After a collecting fence the values are local; should a server not have collected
      // them, the Get asks the rank's node, and that too must end within the timeout.
      pmix_info_t get_info;
      PMIX_INFO_LOAD(&get_info, PMIX_TIMEOUT, &seconds, PMIX_INT);
      rc = PMIx_Get(&proc, key.c_str(), &get_info, 1, got.out());
      PMIX_INFO_DESTRUCT(&get_info);
      if (rc != PMIX_SUCCESS || got.get() == nullptr || got.get()->type != PMIX_BYTE_OBJECT) {
        throw PeerFailure(
            "PMIx: rank " + std::to_string(r) + " published no " + key + " (" + pmix_text(rc) + ")",
            r);
      }
      all[static_cast<std::size_t>(r)].assign(got.get()->data.bo.bytes, got.get()->data.bo.size);
    }
    return all;
  }

 private:
  PmixSession session_;
  std::string local_address_;
  int rank_ = 0;
  int size_ = 1;
  unsigned round_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> pmix_bootstrap(const std::string& local_address) {
  return std::make_unique<PmixBootstrap>(local_address);
}

}  // namespace primus::coll
