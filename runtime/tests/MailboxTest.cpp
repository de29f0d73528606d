//===- MailboxTest.cpp - In-process channels ------------------------------===//

#include "gpipe/runtime/Mailbox.h"

#include <gtest/gtest.h>

#include <thread>

using namespace gpipe::runtime;
using namespace std::chrono_literals;

static MessageKey key(Direction direction, unsigned from, unsigned to,
                      unsigned mb, unsigned channel) {
  return MessageKey{direction, from, to, mb, channel};
}

// A sent payload is received intact, once.
TEST(Mailbox, DeliversPayload) {
  Mailbox mailbox(1000ms);
  ASSERT_EQ(mailbox.send(key(Direction::Activation, 0, 1, 0, 0), {1, 2, 3}), "");
  RecvResult got = mailbox.recv(key(Direction::Activation, 0, 1, 0, 0), 0);
  ASSERT_TRUE(got.ok()) << got.error;
  EXPECT_EQ(got.payload, (std::vector<float>{1, 2, 3}));
}

// A receive waits for a send made later by another thread.
TEST(Mailbox, ReceiveWaitsForLateSend) {
  Mailbox mailbox(10000ms);
  std::thread sender([&] {
    std::this_thread::sleep_for(50ms);
    mailbox.send(key(Direction::Gradient, 2, 1, 3, 0), {4});
  });
  RecvResult got = mailbox.recv(key(Direction::Gradient, 2, 1, 3, 0), 5);
  sender.join();
  ASSERT_TRUE(got.ok()) << got.error;
  EXPECT_EQ(got.payload, std::vector<float>{4});
}

// Activations and gradients with the same indices are different messages.
TEST(Mailbox, DirectionsDoNotCollide) {
  Mailbox mailbox(1000ms);
  mailbox.send(key(Direction::Activation, 0, 1, 0, 0), {1});
  mailbox.send(key(Direction::Gradient, 0, 1, 0, 0), {2});
  EXPECT_EQ(mailbox.recv(key(Direction::Gradient, 0, 1, 0, 0), 0).payload,
            std::vector<float>{2});
  EXPECT_EQ(mailbox.recv(key(Direction::Activation, 0, 1, 0, 0), 0).payload,
            std::vector<float>{1});
}

// A peer that never sends ends the wait with a message naming who waited for what.
TEST(Mailbox, TimeoutNamesWaiterAndMessage) {
  Mailbox mailbox(50ms);
  RecvResult got = mailbox.recv(key(Direction::Activation, 0, 1, 2, 1), 7);
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(got.error,
            "device 1 timed out after 50 ms at op #7 (recv activation from "
            "device 0, micro-batch 2, channel 1): device 0 never sent it");
}

// Sending the same message twice is reported.
TEST(Mailbox, DuplicateSendIsAnError) {
  Mailbox mailbox(1000ms);
  EXPECT_EQ(mailbox.send(key(Direction::Gradient, 1, 0, 4, 0), {1}), "");
  EXPECT_EQ(mailbox.send(key(Direction::Gradient, 1, 0, 4, 0), {1}),
            "device 1: send gradient to device 0, micro-batch 4, channel 0 was "
            "already sent and not received");
}

// Abort wakes a waiting device at once with the reason.
TEST(Mailbox, AbortWakesWaiters) {
  Mailbox mailbox(60000ms);
  std::thread aborter([&] {
    std::this_thread::sleep_for(50ms);
    mailbox.abort("device 0 failed: embedding id 97 out of range");
  });
  auto start = std::chrono::steady_clock::now();
  RecvResult got = mailbox.recv(key(Direction::Activation, 0, 1, 0, 0), 3);
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(got.error, "device 1 stopped at op #3 (recv activation from device "
                       "0, micro-batch 0, channel 0): device 0 failed: "
                       "embedding id 97 out of range");
  EXPECT_EQ(mailbox.send(key(Direction::Activation, 0, 1, 1, 0), {1}),
            "device 0 failed: embedding id 97 out of range");
}

// Four device threads pass 32 micro-batches down a chain; every payload arrives in order and intact.
TEST(Mailbox, ChainOfDeviceThreads) {
  constexpr unsigned numDevices = 4, numMicrobatches = 32;
  Mailbox mailbox(10000ms);
  std::vector<std::vector<float>> received(numMicrobatches);
  std::vector<std::string> errors(numDevices);
  std::vector<std::thread> devices;
  for (unsigned d = 0; d < numDevices; ++d)
    devices.emplace_back([&, d] {
      for (unsigned mb = 0; mb < numMicrobatches; ++mb) {
        std::vector<float> payload{float(mb)};
        if (d > 0) {
          RecvResult got =
              mailbox.recv(key(Direction::Activation, d - 1, d, mb, 0), mb);
          if (!got.ok()) {
            errors[d] = got.error;
            return;
          }
          payload = std::move(got.payload);
          payload.push_back(float(d));
        }
        if (d + 1 < numDevices)
          mailbox.send(key(Direction::Activation, d, d + 1, mb, 0), payload);
        else
          received[mb] = payload;
      }
    });
  for (std::thread &device : devices)
    device.join();
  for (const std::string &error : errors)
    EXPECT_EQ(error, "");
  for (unsigned mb = 0; mb < numMicrobatches; ++mb)
    EXPECT_EQ(received[mb], (std::vector<float>{float(mb), 1, 2, 3}));
}
