// Tensors as call arguments and results: checked encoding, and a round trip through a real
// actor (the built-in echo returns its argument bytes).
#include "runtime/client/tensor.h"

#include <cstring>

#include "tests/cluster/cluster_fixture.h"

namespace skyrl::testing {
namespace {

TensorBytes Floats(std::vector<int64_t> shape, std::vector<float> values) {
  TensorBytes t{"float32", std::move(shape), std::string(values.size() * 4, '\0')};
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

TEST(TensorBytesTest, EncodingIsCheckedBothWays) {
  absl::StatusOr<v1::Tensor> p = ToProto(Floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<TensorBytes> back = FromProto(*p);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back->data, Floats({2, 3}, {1, 2, 3, 4, 5, 6}).data);
  TensorBytes short_data = Floats({2, 3}, {1, 2, 3});
  absl::Status s = Validate(short_data);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("tensor.data: 12 bytes, but float32 with 6 elements needs 24"),
            std::string::npos)
      << s;
  EXPECT_NE(Validate({"complex128", {1}, std::string(16, '\0')}).message().find("tensor.dtype"),
            std::string::npos);
  EXPECT_NE(Validate({"uint8", {-1}, ""}).message().find("tensor.shape[0]: negative"), std::string::npos);
  EXPECT_TRUE(Validate({"bfloat16", {0, 7}, ""}).ok()) << "empty tensors are fine";
  v1::Tensor lying = *p;
  lying.add_shape(2);
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(lying).status())) << "a received tensor is checked too";
}

TEST_F(LocalClusterTest, TensorsTravelThroughAnActorCall) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto client = Client::Connect(address_, Token());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<ActorHandle> a = (*client)->CreateActor("echo");
  ASSERT_TRUE(a.ok()) << a.status();
  TensorBytes big = Floats({256, 1024}, std::vector<float>(256 * 1024, 0.5f));
  absl::StatusOr<v1::Tensor> reply = (*client)->CallProto<v1::Tensor>(*a, "echo", *ToProto(big));
  ASSERT_TRUE(reply.ok()) << reply.status();
  absl::StatusOr<TensorBytes> back = FromProto(*reply);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape, big.shape);
  EXPECT_EQ(back->data, big.data);
}

}  // namespace
}  // namespace skyrl::testing
