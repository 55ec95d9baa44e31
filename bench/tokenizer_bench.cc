// envforge_tokenizer_bench: tokenizer encode throughput on a synthetic, realistic corpus, as one
// JSON object on stdout.
//
//   envforge_tokenizer_bench --tokenizer DIR [--mb N] [--repeat N] [--dump-stress FILE]
//
// The corpus is generated from a fixed seed (same bytes on every run and platform): documents of a
// few KB each mixing English prose, C++/Python code, JSON and CJK text, encoded one document at a
// time as a prompt would be. Figures, in CPU seconds and MB per CPU second (the best of --repeat
// runs): encode (pre-tokenizer + BPE) and the pre-tokenizer alone. `ids_fnv1a` hashes the ids, so
// that two builds (say two regex engines) can be checked to give identical ids;
// `stress_ids_fnv1a` hashes the ids of a second corpus built to probe the pre-tokenizer's corners
// (random code points from every plane, every kind of white space, invalid UTF-8), not timed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/rng.h"
#include "inference/internal/pre_tokenizer.h"
#include "inference/internal/utf8.h"
#include "inference/tokenizer.h"

namespace envforge {
namespace {

// Process CPU time, not wall time: on a shared, busy machine wall time mostly measures the
// neighbours. The bench is single-threaded.
double CpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

const char* const kWords[] = {
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "environment",
    "verifier",
    "session",
    "tokenizer",
    "throughput",
    "database",
    "Restaurant",
    "Hotel",
    "Paris",
    "München",
    "naïve",
    "café",
    "résumé",
    "don't",
    "we're",
    "it's",
    "they'll",
    "I've",
    "O'Brien",
    "GPU",
    "API",
    "JSON",
    "HTTP/2",
    "e-mail",
    "state-of-the-art",
    "U.S.",
    "Dr.",
    "approximately",
};

const char* const kCodeLines[] = {
    "#include <vector>\n",
    "int main(int argc, char** argv) {\n",
    "  for (size_t i = 0; i < items.size(); ++i) {\n",
    "    total += items[i].price * 1.0725;  // tax\n",
    "    if (!status.ok()) return status;\n",
    "\treturn std::make_unique<Impl>(std::move(config));\n",
    "}\n",
    "def verify(answer, db):\n",
    "    rows = db.execute(\"SELECT id, name FROM hotels WHERE stars >= ?\", (4,)).fetchall()\n",
    "    return {\"passed\": len(rows) == 12, \"score\": 0.75, \"reasons\": []}\n",
    "\n",
    "        x = [a ** 2 for a in range(10_000) if a % 3 == 0]\n",
    "    }\n  }\n",
    "SELECT COUNT(*) FROM _tasks WHERE difficulty > 3 AND name LIKE '%hotel%';\n",
    "const auto [it, inserted] = cache.try_emplace(key, std::vector<int32_t>{});\n",
};

const char* const kCjk[] = {
    "中文分词是自然语言处理的基础任务之一。",
    "我们在北京的酒店预订了三个房间，价格为每晚1280元。",
    "日本語のテキストを正しく分割する必要があります。",
    "東京タワーは1958年に完成しました。",
    "한국어 텍스트도 포함되어 있습니다.",
    "「引用」と『二重引用』、そして（括弧）。",
    "数据库中有２０２６条记录。",
    "カタカナとひらがなと漢字が混ざった文章です。",
};

const char* const kExtras[] = {
    "🙂", "👍🏽", "🚀🚀",      "→",      "≤",        "€",       "£",       "©",     "™",
    "°C",   "½",        "e\u0301", "ñ",      "ß",        "Ω",       "π",       "∑",     "…",
    "—",    "“quoted”", "\u00a0",  "\u3000", "Ελληνικά", "Русский", "العربية", "हिन्दी", "ไทย",
};

template <size_t N>
const char* Pick(Rng& rng, const char* const (&list)[N]) {
  return list[rng.Below(N)];
}

void AppendProse(Rng& rng, std::string* out) {
  const uint64_t sentences = 2 + rng.Below(6);
  for (uint64_t s = 0; s < sentences; ++s) {
    const uint64_t words = 4 + rng.Below(18);
    for (uint64_t w = 0; w < words; ++w) {
      if (w > 0) out->push_back(' ');
      const uint64_t kind = rng.Below(40);
      if (kind == 0) {
        *out += std::to_string(rng.Below(10'000'000));
      } else if (kind == 1) {
        *out += Pick(rng, kExtras);
      } else if (kind == 2) {
        *out += std::to_string(rng.Below(100)) + "." + std::to_string(rng.Below(100)) + "%";
      } else {
        std::string word = Pick(rng, kWords);
        if (w == 0 && word[0] >= 'a' && word[0] <= 'z') word[0] = static_cast<char>(word[0] - 'a' + 'A');
        *out += word;
      }
      if (rng.Below(12) == 0) out->push_back(',');
    }
    *out += rng.Below(8) == 0 ? "?" : rng.Below(10) == 0 ? "!" : ".";
    out->push_back(rng.Below(5) == 0 ? '\n' : ' ');
  }
  if (rng.Below(3) == 0) *out += "\n\n";
}

void AppendCode(Rng& rng, std::string* out) {
  const uint64_t lines = 3 + rng.Below(15);
  for (uint64_t i = 0; i < lines; ++i) *out += Pick(rng, kCodeLines);
}

void AppendJson(Rng& rng, std::string* out) {
  Json object = Json::object();
  const uint64_t fields = 2 + rng.Below(8);
  for (uint64_t i = 0; i < fields; ++i) {
    const std::string key = std::string(Pick(rng, kWords)) + "_" + std::to_string(i);
    switch (rng.Below(5)) {
      case 0: object[key] = rng.Below(1'000'000); break;
      case 1: object[key] = rng.Unit() * 1000.0; break;
      case 2: object[key] = std::string(Pick(rng, kWords)) + " " + Pick(rng, kCjk); break;
      case 3: object[key] = Json::array({rng.Below(10), Pick(rng, kWords), nullptr, true}); break;
      default: object[key] = Json{{"id", rng.Below(5000)}, {"name", Pick(rng, kWords)}}; break;
    }
  }
  *out += object.dump(rng.Below(2) == 0 ? -1 : 2);
  out->push_back('\n');
}

void AppendCjk(Rng& rng, std::string* out) {
  const uint64_t sentences = 1 + rng.Below(5);
  for (uint64_t i = 0; i < sentences; ++i) *out += Pick(rng, kCjk);
  out->push_back('\n');
}

// Documents of roughly 1-8 KB until `bytes` are reached.
std::vector<std::string> RealisticCorpus(size_t bytes) {
  Rng rng(0x7e57c0de);
  std::vector<std::string> documents;
  size_t total = 0;
  while (total < bytes) {
    std::string doc;
    const size_t target = 1024 + rng.Below(7 * 1024);
    while (doc.size() < target) {
      const uint64_t kind = rng.Below(10);
      if (kind < 4) {
        AppendProse(rng, &doc);
      } else if (kind < 6) {
        AppendCode(rng, &doc);
      } else if (kind < 8) {
        AppendJson(rng, &doc);
      } else {
        AppendCjk(rng, &doc);
      }
    }
    total += doc.size();
    documents.push_back(std::move(doc));
  }
  return documents;
}

// Code points below 0x110000 only: AppendUtf8 writes them as plain UTF-8.
void AppendCodePoint(uint32_t cp, std::string* out) { inference::internal::AppendUtf8(static_cast<char32_t>(cp), out); }

// Short documents of random characters: ASCII, white space of every kind, code points from every
// plane (assigned or not), invalid UTF-8 (stray continuation bytes, truncated sequences, overlongs,
// surrogates, bytes F5..FF).
std::vector<std::string> StressCorpus() {
  Rng rng(0x5eed);
  const uint32_t kSpaces[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85, 0xA0, 0x1680, 0x2000, 0x2007,
                              0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x1C, 0x1F, 0x200B, 0xFEFF};
  const char* const kInvalid[] = {"\x80", "\xbf", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                  "\xf5", "\xff", "\xfe",     "\xc3",         "\xe4\xb8",     "\xf0\x9f\x99"};
  std::vector<std::string> documents;
  for (int d = 0; d < 4000; ++d) {
    std::string doc;
    const uint64_t length = 1 + rng.Below(64);
    for (uint64_t i = 0; i < length; ++i) {
      const uint64_t kind = rng.Below(20);
      if (kind < 6) {
        AppendCodePoint(static_cast<uint32_t>(0x20 + rng.Below(0x5F)), &doc);
      } else if (kind < 9) {
        AppendCodePoint(kSpaces[rng.Below(sizeof(kSpaces) / sizeof(kSpaces[0]))], &doc);
      } else if (kind < 11) {
        doc += std::to_string(rng.Below(100000));
      } else if (kind < 12) {
        doc += kInvalid[rng.Below(sizeof(kInvalid) / sizeof(kInvalid[0]))];
      } else if (kind < 15) {
        AppendCodePoint(static_cast<uint32_t>(0x80 + rng.Below(0x3000 - 0x80)), &doc);
      } else {
        uint32_t cp = static_cast<uint32_t>(rng.Below(0x110000));
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x4E00 + (cp & 0xFFF);
        AppendCodePoint(cp, &doc);
      }
    }
    documents.push_back(std::move(doc));
  }
  return documents;
}

uint64_t Fnv1a(uint64_t hash, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    for (int k = 0; k < 4; ++k) {
      hash ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      hash *= 0x100000001b3ULL;
    }
  }
  return hash;
}

constexpr const char* kUsage =
    "usage: envforge_tokenizer_bench --tokenizer DIR [--mb N] [--repeat N] [--dump-stress FILE]\n";

int Run(int argc, char** argv) {
  std::string dir;
  double megabytes = 4;
  int repeat = 3;
  // One line per stress document: its bytes in hex, its ids, the byte lengths of its pre-tokenizer
  // pieces (tab-separated).
  std::string dump_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokenizer" && i + 1 < argc) {
      dir = argv[++i];
    } else if (arg == "--mb" && i + 1 < argc) {
      megabytes = std::atof(argv[++i]);
    } else if (arg == "--dump-stress" && i + 1 < argc) {
      dump_path = argv[++i];
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "%s", kUsage);
      return 2;
    }
  }
  if (dir.empty() || megabytes <= 0 || repeat < 1) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  auto tokenizer = inference::Tokenizer::Load(dir);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  const std::string json_path = std::filesystem::is_directory(dir) ? dir + "/tokenizer.json" : dir;
  auto json_text = ReadFileToString(json_path);
  if (!json_text.ok()) {
    std::fprintf(stderr, "%s\n", json_text.status().ToString().c_str());
    return 1;
  }
  auto root = ParseJson(*json_text);
  if (!root.ok()) {
    std::fprintf(stderr, "%s\n", root.status().ToString().c_str());
    return 1;
  }
  auto pre_tokenizer = inference::internal::PreTokenizer::FromJson(root->value("pre_tokenizer", Json()));
  if (!pre_tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", pre_tokenizer.status().ToString().c_str());
    return 1;
  }

  const std::vector<std::string> corpus = RealisticCorpus(static_cast<size_t>(megabytes * 1024 * 1024));
  size_t bytes = 0;
  for (const std::string& doc : corpus) bytes += doc.size();

  double best_encode = 1e300;
  size_t tokens = 0;
  uint64_t ids_hash = 0;
  for (int r = 0; r < repeat; ++r) {
    tokens = 0;
    ids_hash = 0xcbf29ce484222325ULL;
    const double start = CpuSeconds();
    for (const std::string& doc : corpus) {
      const std::vector<int32_t> ids = (*tokenizer)->Encode(doc, /*parse_special=*/false);
      tokens += ids.size();
      ids_hash = Fnv1a(ids_hash, ids);
    }
    best_encode = std::min(best_encode, CpuSeconds() - start);
  }

  double best_split = 1e300;
  size_t pieces_count = 0;
  std::vector<std::string> pieces;
  for (int r = 0; r < repeat; ++r) {
    pieces_count = 0;
    const double start = CpuSeconds();
    for (const std::string& doc : corpus) {
      pieces.clear();
      pre_tokenizer->Split(doc, &pieces);
      pieces_count += pieces.size();
    }
    best_split = std::min(best_split, CpuSeconds() - start);
  }

  uint64_t stress_hash = 0xcbf29ce484222325ULL;
  size_t stress_bytes = 0;
  std::string dump;
  for (const std::string& doc : StressCorpus()) {
    stress_bytes += doc.size();
    const std::vector<int32_t> ids = (*tokenizer)->Encode(doc, /*parse_special=*/false);
    stress_hash = Fnv1a(stress_hash, ids);
    if (!dump_path.empty()) {
      static const char kHex[] = "0123456789abcdef";
      for (char c : doc) {
        dump.push_back(kHex[static_cast<unsigned char>(c) >> 4]);
        dump.push_back(kHex[static_cast<unsigned char>(c) & 15]);
      }
      dump.push_back('\t');
      for (int32_t id : ids) dump += std::to_string(id) + " ";
      dump.push_back('\t');
      pieces.clear();
      pre_tokenizer->Split(doc, &pieces);
      for (const std::string& piece : pieces) dump += std::to_string(piece.size()) + " ";
      dump.push_back('\n');
    }
    if ((*tokenizer)->Decode(ids) != doc) {
      std::fprintf(stderr, "round trip failed on a stress document\n");
      return 1;
    }
  }

  if (!dump_path.empty()) {
    if (Status written = WriteFileAtomically(dump_path, dump); !written.ok()) {
      std::fprintf(stderr, "%s\n", written.ToString().c_str());
      return 1;
    }
  }

  const double mb = static_cast<double>(bytes) / (1024.0 * 1024.0);
  char hash_text[2][32];
  std::snprintf(hash_text[0], sizeof(hash_text[0]), "%016llx", static_cast<unsigned long long>(ids_hash));
  std::snprintf(hash_text[1], sizeof(hash_text[1]), "%016llx", static_cast<unsigned long long>(stress_hash));
  const Json report = {
      {"documents", corpus.size()},
      {"bytes", bytes},
      {"tokens", tokens},
      {"pieces", pieces_count},
      {"repeat", repeat},
      {"encode_seconds", best_encode},
      {"encode_mb_per_s", mb / best_encode},
      {"pretokenize_seconds", best_split},
      {"pretokenize_mb_per_s", mb / best_split},
      {"ids_fnv1a", hash_text[0]},
      {"stress_bytes", stress_bytes},
      {"stress_ids_fnv1a", hash_text[1]},
  };
  std::printf("%s\n", report.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace envforge

int main(int argc, char** argv) { return envforge::Run(argc, argv); }
