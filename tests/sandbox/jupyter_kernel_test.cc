// envforge's Jupyter client against the real ipykernel (Debian's python3-ipykernel) in its
// sandbox: signatures both ways, every output type, interrupts, a kernel that ignores them,
// crashes, memory and fork bombs, the network and the file system.
#include <doctest/doctest.h>

#include <unistd.h>

#include <string>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "sandbox/jupyter/jupyter_message.h"
#include "sandbox/jupyter/kernel_client.h"
#include "sandbox/jupyter/kernel_process.h"

namespace envforge::sandbox::jupyter {
namespace {

using std::chrono::milliseconds;

// A running kernel and a client ready to execute.
struct Kernel {
  std::unique_ptr<KernelProcess> process;
  std::unique_ptr<KernelClient> client;

  explicit Kernel(KernelLaunchOptions options = {}) {
    options.scratch_root = "/tmp/envforge-jupyter-test";
    Result<std::unique_ptr<KernelProcess>> launched = KernelProcess::Launch(options);
    REQUIRE_MESSAGE(launched.ok(), launched.status().ToString());
    process = std::move(launched).value();
    Result<std::unique_ptr<KernelClient>> connected = KernelClient::Connect(process->connection());
    REQUIRE(connected.ok());
    client = std::move(connected).value();
    Status ready = client->WaitReady(std::chrono::seconds(30), process->Probe());
    REQUIRE_MESSAGE(ready.ok(), ready.ToString() << "\nkernel log:\n" << process->LogTail());
  }

  ExecuteResult Run(const std::string& code, milliseconds wall = milliseconds(10000)) {
    ExecuteLimits limits;
    limits.wall = wall;
    limits.interrupt_grace = milliseconds(3000);
    Result<ExecuteResult> result = client->Execute(code, limits, process->Probe());
    REQUIRE_MESSAGE(result.ok(), result.status().ToString());
    return std::move(result).value();
  }
};

std::string AllText(const ExecuteResult& result) {
  std::string text;
  for (const Json& output : result.outputs) {
    if (output.contains("text")) text += output["text"].get<std::string>();
    if (output.contains("data") && output["data"].contains("text/plain"))
      text += output["data"]["text/plain"].get<std::string>();
    if (output.contains("evalue"))
      text += output["ename"].get<std::string>() + ": " + output["evalue"].get<std::string>();
  }
  return text;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_SUITE("sandbox.jupyter.kernel") {
  TEST_CASE("every output type comes back in order, signed and verified both ways" * doctest::timeout(120)) {
    Kernel kernel;
    CHECK(kernel.client->kernel_info()["implementation"] == "ipython");
    CHECK(kernel.client->Heartbeat(milliseconds(2000)));
    CHECK(kernel.process->isolation()["namespaces"].get<std::string>().rfind("on", 0) == 0);
    if (geteuid() == 0) {
      CHECK(kernel.process->isolation()["cgroup"].get<std::string>().rfind("on", 0) == 0);
      CHECK(kernel.process->isolation()["seccomp"] == "on");
    }

    ExecuteResult sum = kernel.Run("1+1");
    CHECK(sum.outcome == ExecuteOutcome::kOk);
    REQUIRE(sum.outputs.size() == 1);
    CHECK(sum.outputs[0]["output_type"] == "execute_result");
    CHECK(sum.outputs[0]["data"]["text/plain"] == "2");
    CHECK(sum.execution_count == 1);

    ExecuteResult mixed = kernel.Run(
        "import sys, base64\n"
        "from IPython.display import display, Image\n"
        "print('out', 1)\n"
        "print('err', file=sys.stderr)\n"
        "png = "
        "base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+"
        "M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')\n"
        "display(Image(data=png))\n"
        "display('shown')\n"
        "40 + 2\n");
    CHECK(mixed.outcome == ExecuteOutcome::kOk);
    REQUIRE(mixed.outputs.size() == 5);
    CHECK(mixed.outputs[0] == Json{{"output_type", "stream"}, {"name", "stdout"}, {"text", "out 1\n"}});
    CHECK(mixed.outputs[1]["name"] == "stderr");
    CHECK(mixed.outputs[2]["output_type"] == "display_data");
    CHECK(mixed.outputs[2]["data"]["image/png"].get<std::string>().rfind("iVBORw0KGgo", 0) == 0);
    CHECK(mixed.outputs[3]["data"]["text/plain"] == "'shown'");
    CHECK(mixed.outputs[4]["output_type"] == "execute_result");
    CHECK(mixed.outputs[4]["data"]["text/plain"] == "42");

    ExecuteResult error = kernel.Run("def f():\n    return 1/0\nf()");
    CHECK(error.outcome == ExecuteOutcome::kError);
    CHECK(error.error["ename"] == "ZeroDivisionError");
    CHECK(error.error["evalue"] == "division by zero");
    std::string traceback = error.error["traceback"].dump();
    CHECK(Contains(traceback, "return 1/0"));
    CHECK_FALSE(Contains(traceback, "\\u001b"));

    // State persists between executes.
    kernel.Run("x = 41");
    CHECK(AllText(kernel.Run("x + 1")) == "42");
    CHECK(kernel.client->rejected_messages() == 0);
    CHECK(kernel.client->Shutdown(milliseconds(5000)).ok());
  }

  TEST_CASE("a forged or replayed kernel message is dropped; the kernel refuses a bad signature" *
            doctest::timeout(120)) {
    Kernel kernel;
    // Code in the kernel sends on its own iopub socket: once with a wrong signature, once a
    // correctly signed message twice (the second is a replay).
    ExecuteResult forged = kernel.Run(
        "k = get_ipython().kernel\n"
        "bad = k.session.serialize(k.session.msg('stream', {'name': 'stdout', 'text': 'FORGED'}, "
        "parent=k.get_parent()))\n"
        "bad[1] = b'0' * 64\n"
        "k.iopub_socket.send_multipart(bad)\n"
        "good = k.session.serialize(k.session.msg('stream', {'name': 'stdout', 'text': 'ONCE'}, "
        "parent=k.get_parent()))\n"
        "k.iopub_socket.send_multipart(good)\n"
        "k.iopub_socket.send_multipart(good)\n"
        "import time; time.sleep(0.2)\n");
    CHECK(forged.outcome == ExecuteOutcome::kOk);
    const std::string text = AllText(forged);
    CHECK_FALSE(Contains(text, "FORGED"));
    CHECK(text == "ONCE");
    CHECK(kernel.client->rejected_messages() == 2);

    // Our side: a request with a bad signature gets no answer; the same request signed does.
    zmq::context_t context;
    zmq::socket_t shell(context, zmq::socket_type::dealer);
    shell.set(zmq::sockopt::linger, 0);
    shell.connect(kernel.process->connection().Address(Channel::kShell));
    auto ask = [&](bool sign_correctly) {
      JupyterMessage request;
      request.header = NewHeader("kernel_info_request", "raw-test");
      MessageSigner signer(sign_correctly ? kernel.process->connection().key : "wrong key");
      std::vector<zmq::const_buffer> request_frames;
      const std::vector<std::string> encoded = EncodeMessage(request, signer);
      for (const std::string& frame : encoded) request_frames.push_back(zmq::buffer(frame));
      zmq::send_multipart(shell, request_frames);
      std::array<zmq::pollitem_t, 1> items = {zmq::pollitem_t{shell.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items.data(), 1, milliseconds(2000));
      if (!(items[0].revents & ZMQ_POLLIN)) return std::string();
      std::vector<zmq::message_t> parts;
      (void)zmq::recv_multipart(shell, std::back_inserter(parts));
      std::vector<std::string> frames;
      for (auto& part : parts) frames.push_back(part.to_string());
      Result<JupyterMessage> reply = DecodeMessage(frames, MessageSigner(kernel.process->connection().key));
      return reply.ok() ? reply->type() : std::string("undecodable");
    };
    CHECK(ask(false).empty());
    CHECK(ask(true) == "kernel_info_reply");
  }

  TEST_CASE("an infinite loop is interrupted; the kernel and its state live on" * doctest::timeout(120)) {
    Kernel kernel;
    kernel.Run("y = 7");
    ExecuteResult loop = kernel.Run("while True:\n    pass", milliseconds(1000));
    CHECK(loop.outcome == ExecuteOutcome::kTimeout);
    CHECK(loop.limit == "wall_time");
    CHECK_FALSE(loop.needs_restart);
    CHECK(Contains(AllText(loop), "KeyboardInterrupt"));
    CHECK(AllText(kernel.Run("y * 6")) == "42");

    ExecuteResult sleep = kernel.Run("import time\ntime.sleep(60)", milliseconds(500));
    CHECK(sleep.outcome == ExecuteOutcome::kTimeout);
    CHECK_FALSE(sleep.needs_restart);
    CHECK(sleep.wall_ms < 5000);
  }

  TEST_CASE("a CPU budget per execute stops a busy loop before the wall clock" * doctest::timeout(120)) {
    if (geteuid() != 0) return;  // CPU accounting needs the kernel's cgroup
    Kernel kernel;
    ExecuteLimits limits;
    limits.wall = milliseconds(30000);
    limits.cpu_seconds = 0.5;
    Result<ExecuteResult> spin = kernel.client->Execute("while True:\n    pass", limits, kernel.process->Probe());
    REQUIRE(spin.ok());
    CHECK(spin->outcome == ExecuteOutcome::kTimeout);
    CHECK(spin->limit == "cpu_time");
    CHECK(spin->wall_ms < 10000);
  }

  TEST_CASE("a loop that ignores SIGINT needs a restart" * doctest::timeout(120)) {
    Kernel kernel;
    ExecuteResult stubborn = kernel.Run(
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", milliseconds(500));
    CHECK(stubborn.outcome == ExecuteOutcome::kTimeout);
    CHECK(stubborn.needs_restart);
    kernel.process->Kill();
    CHECK_FALSE(kernel.process->Alive());
    CHECK_FALSE(kernel.client->Heartbeat(milliseconds(300)));
  }

  TEST_CASE("a kernel that dies mid-execute is crashed: exit, segfault" * doctest::timeout(120)) {
    SUBCASE("os._exit") {
      Kernel kernel;
      ExecuteResult exited = kernel.Run("import os, time\nprint('before')\ntime.sleep(0.3)\nos._exit(3)");
      CHECK(exited.outcome == ExecuteOutcome::kCrashed);
      CHECK(Contains(AllText(exited), "before"));
      CHECK(kernel.process->ExitReason() == "exit code 3");
    }
    SUBCASE("segmentation fault") {
      Kernel kernel;
      ExecuteResult crashed = kernel.Run("import ctypes\nctypes.string_at(0)");
      CHECK(crashed.outcome == ExecuteOutcome::kCrashed);
      CHECK_FALSE(kernel.process->ExitReason().empty());
    }
  }

  TEST_CASE("memory and fork bombs are contained by the kernel's cgroup" * doctest::timeout(120)) {
    if (geteuid() != 0) return;  // cgroups need root here
    KernelLaunchOptions options;
    options.limits.memory_bytes = 256 << 20;
    options.limits.max_processes = 24;
    SUBCASE("memory") {
      Kernel kernel(options);
      ExecuteResult hog = kernel.Run("blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))");
      CHECK(hog.outcome == ExecuteOutcome::kCrashed);
      CHECK(kernel.process->OomKilled());
      CHECK(kernel.process->ExitReason() == "memory limit");
    }
    SUBCASE("fork") {
      Kernel kernel(options);
      ExecuteResult forks = kernel.Run(
          "import os, time\n"
          "children = 0\n"
          "for _ in range(200):\n"
          "    try:\n"
          "        pid = os.fork()\n"
          "    except OSError as error:\n"
          "        print('blocked', error.errno)\n"
          "        break\n"
          "    if pid == 0:\n"
          "        time.sleep(30)\n"
          "        os._exit(0)\n"
          "    children += 1\n"
          "print('children', children)\n");
      CHECK(forks.outcome == ExecuteOutcome::kOk);
      CHECK(Contains(AllText(forks), "blocked 11"));
      CHECK(kernel.process->PidsLimited());
      CHECK(AllText(kernel.Run("1+1")) == "2");
    }
  }

  TEST_CASE("no network, no host files; data files are read-only; the working directory is writable" *
            doctest::timeout(120)) {
    KernelLaunchOptions options;
    options.files = {{"data.csv", "city,population\nOslo,709000\nBergen,291000\n"}, {"more/notes.txt", "nested"}};
    Kernel kernel(options);
    ExecuteResult network = kernel.Run(
        "import socket\n"
        "for host, port in [('127.0.0.1', 22), ('1.1.1.1', 80)]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2)\n"
        "        print('connected', host)\n"
        "    except OSError as error:\n"
        "        print('refused', host, type(error).__name__)\n");
    CHECK(Contains(AllText(network), "refused 127.0.0.1"));
    CHECK(Contains(AllText(network), "refused 1.1.1.1"));
    CHECK_FALSE(Contains(AllText(network), "connected"));

    ExecuteResult files = kernel.Run(
        "import os\n"
        "for path in ['/etc/passwd', '/etc/shadow', '/root', '/home', '/tmp/envforge-jupyter-test', "
        "'/proc/1/environ']:\n"
        "    print(path, os.path.exists(path))\n"
        "print(sorted(os.listdir('/work')))\n");
    const std::string listing = AllText(files);
    CHECK(Contains(listing, "/etc/passwd False"));
    CHECK(Contains(listing, "/etc/shadow False"));
    CHECK(Contains(listing, "/root False"));
    CHECK(Contains(listing, "/home False"));
    CHECK(Contains(listing, "/tmp/envforge-jupyter-test False"));
    CHECK(Contains(listing, "['data.csv', 'more']"));
    CHECK(AllText(kernel.Run("open('more/notes.txt').read()")) == "'nested'");

    ExecuteResult data = kernel.Run(
        "import csv\n"
        "rows = list(csv.DictReader(open('data.csv')))\n"
        "print(sum(int(r['population']) for r in rows))\n"
        "try:\n"
        "    open('data.csv', 'a').write('x')\n"
        "except OSError as error:\n"
        "    print('read-only', error.errno in (13, 30))\n"
        "open('notes.txt', 'w').write('mine')\n"
        "print(open('notes.txt').read())\n");
    CHECK(AllText(data) == "1000000\nread-only True\nmine\n");
  }

  TEST_CASE("a data file path that climbs out is refused before anything starts") {
    KernelLaunchOptions options;
    options.scratch_root = "/tmp/envforge-jupyter-test";
    options.files = {{"a/../../escape", "x"}};
    Result<std::unique_ptr<KernelProcess>> refused = KernelProcess::Launch(options);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(refused.status().message(), "'a/../../escape'"));
    for (const char* bad : {"/etc/passwd", "", "a//b", "./a"}) {
      options.files = {{bad, "x"}};
      CHECK(KernelProcess::Launch(options).status().code() == StatusCode::kInvalidArgument);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox::jupyter
