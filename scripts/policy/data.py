"""Training data: transcripts in the DSV32 chat format, tokenized with a loss mask, in batches.

A transcript is one JSON object per line (policy-plan.md, step 3):
    {"env", "task", "template", "tier", "thinking", "text": "<rendered text from BOS>",
     "spans": [[start, end], ...]}
where spans are Python str offsets of what the model generates (each assistant turn, from after
its prompt's </think> or <think> up to and including its EOS token). The text is tokenized in
segments split at span boundaries (they always sit next to special tokens, so splitting changes
nothing), and the loss mask marks the tokens inside spans.

`synthetic_transcripts` makes transcripts of the same shape (a shop domain with three lookup
tools and submit_result, tiers 1-4, thinking and not) rendered with `render_chat`, a port of the
engine's DSV32 encoder (inference/chat_format.cc) for the tools/tool-call subset used here. It is
what the smoke test trains on and what development ran on before real transcripts existed.
"""

import json
import random
import re

import numpy as np

from . import tokenizer as tok

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working in an environment through its tools. Call tools to gather what you "
    "need, then call submit_result exactly once with your final answer as answer_text (JSON text "
    "when the task asks for structured data).")

# The engine's tools block (inference/chat_format.cc kToolsBlockHead / kToolsBlockTail).
TOOLS_BLOCK_HEAD = (
    "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
    "You can invoke functions by writing a \"<｜DSML｜function_calls>\" block like the following as part of "
    "your reply to the user:\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"$FUNCTION_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"$FUNCTION_NAME2\">\n...\n</｜DSML｜invoke>\n"
    "</｜DSML｜function_calls>\n\nString and scalar parameters should be specified as is without any escaping "
    "or quotes, while lists and objects should use JSON format. The \"string\" attribute should be set to "
    "\"true\" for string type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n"
    "If the thinking_mode is enabled, then after function results you should strongly consider outputting a "
    "thinking block. Here is an example:\n\n<｜DSML｜function_calls>\n...\n</｜DSML｜function_calls>\n\n"
    "<function_results>\n...\n</function_results>\n\n<think>...thinking about results</think>\n\n"
    "Here are the functions available in JSONSchema format:\n<functions>\n")
TOOLS_BLOCK_TAIL = "\n</functions>\n"


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------------------------
# Rendering (the DSV32 encoder's subset: system + tools, user, assistant tool calls, tool results)


def _invoke(name, arguments):
    params = []
    for key, value in arguments.items():
        is_string = isinstance(value, str)
        text = value if is_string else json.dumps(value, ensure_ascii=False)
        params.append('<｜DSML｜parameter name="%s" string="%s">%s</｜DSML｜parameter>'
                      % (key, "true" if is_string else "false", text))
    return '<｜DSML｜invoke name="%s">\n%s\n</｜DSML｜invoke>' % (name, "\n".join(params))


def render_chat(messages, tools, thinking):
    """(text, spans) of a conversation; spans cover each assistant turn up to its EOS."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = tok.BOS
    spans = []
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "system":
            text += m["content"]
            if tools:
                text += "\n\n" + TOOLS_BLOCK_HEAD + "\n".join(
                    json.dumps(t, ensure_ascii=False) for t in tools) + TOOLS_BLOCK_TAIL
        elif role == "user":
            text += tok.USER + m["content"] + tok.ASSISTANT
            text += tok.THINK if (i == last_user and thinking) else tok.THINK_END
        elif role == "tool":
            first = messages[i - 1]["role"] != "tool"
            last = i + 1 == len(messages) or messages[i + 1]["role"] != "tool"
            if first:
                text += "\n\n<function_results>"
            text += "\n<result>" + m["content"] + "</result>"
            if last:
                text += "\n</function_results>\n\n" + (tok.THINK if thinking and i >= last_user else tok.THINK_END)
        else:
            start = len(text)
            if thinking and i > last_user:
                text += m.get("reasoning_content", "") + tok.THINK_END
            text += m.get("content", "")
            calls = m.get("tool_calls") or []
            if calls:
                text += "\n\n<｜DSML｜function_calls>\n" + "\n".join(
                    _invoke(c["name"], c["arguments"]) for c in calls) + "\n</｜DSML｜function_calls>"
            text += tok.EOS
            spans.append([start, len(text)])
    return text, spans


# ---------------------------------------------------------------------------------------------
# Synthetic shop transcripts

SHOP_TOOLS = [
    {"name": "get_product", "description": "Get one product by exact name.",
     "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    {"name": "list_products", "description": "List the products of a category.",
     "parameters": {"type": "object", "properties": {"category": {"type": "string"}},
                    "required": ["category"]}},
    {"name": "get_supplier", "description": "Get a supplier by exact name.",
     "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    {"name": "submit_result", "description": "Submit the final answer and end the episode.",
     "parameters": {"type": "object", "properties": {"answer_text": {"type": "string"}},
                    "required": ["answer_text"]}},
]
_SYLLABLES = ["ve", "xo", "du", "na", "ka", "ri", "mo", "ta", "lu", "pe", "zo", "fi", "ga", "no", "sa",
              "bre", "tol", "vin", "mar", "kel", "dra", "pol", "sen", "tur", "qui"]
_NOUNS = {"kitchen": ["Kettle", "Pan", "Mixer", "Toaster"], "lighting": ["Lamp", "Bulb", "Lantern"],
          "garden": ["Hose", "Rake", "Shovel", "Planter"], "office": ["Stapler", "Desk", "Chair", "Folder"],
          "audio": ["Speaker", "Headset", "Radio"], "sports": ["Ball", "Racket", "Helmet"]}
_CITIES = ["Oslo", "Lyon", "Porto", "Graz", "Turin", "Gent", "Bern", "Malmo", "Split", "Riga"]


def _word(rng, parts=2):
    w = "".join(rng.choice(_SYLLABLES) for _ in range(parts))
    return w[0].upper() + w[1:]


def _shop(rng):
    suppliers = {}
    while len(suppliers) < 5:
        suppliers[_word(rng) + " " + rng.choice(["Co", "Ltd", "Works"])] = {
            "city": rng.choice(_CITIES), "phone": "555-%04d" % rng.randrange(10000)}
    products = {}
    for category in rng.sample(sorted(_NOUNS), 5):
        prices = rng.sample(range(10, 1000), rng.randint(3, 5))
        for price in prices:
            name = _word(rng) + " " + rng.choice(_NOUNS[category])
            products[name] = {"name": name, "category": category, "price": price,
                              "stock": rng.randint(0, 60), "rating": round(rng.uniform(2.0, 5.0), 1),
                              "supplier": rng.choice(sorted(suppliers))}
    return products, suppliers


def _episode(rng, products, suppliers, tier):
    """(prompt, [(tool call, result text, reasoning)], answer dict, reasoning for the answer)."""
    name = rng.choice(sorted(products))
    p = products[name]
    row = lambda q: {k: q[k] for k in ("name", "price", "stock", "rating")}  # noqa: E731
    if tier == 1:
        field = rng.choice(["price", "stock"])
        prompt = "What is the %s of \"%s\"? Submit {\"%s\": <integer>}." % (field, name, field)
        steps = [({"name": "get_product", "arguments": {"name": name}}, json.dumps(p),
                  "I need the product %s." % name)]
        return prompt, steps, {field: p[field]}, "The %s is %d." % (field, p[field])
    if tier == 2:
        s = p["supplier"]
        prompt = "In which city is the supplier of \"%s\"? Submit {\"city\": \"<city>\"}." % name
        steps = [({"name": "get_product", "arguments": {"name": name}}, json.dumps(p),
                  "First the product %s." % name),
                 ({"name": "get_supplier", "arguments": {"name": s}}, json.dumps({"name": s, **suppliers[s]}),
                  "Its supplier is %s." % s)]
        return prompt, steps, {"city": suppliers[s]["city"]}, "The city is %s." % suppliers[s]["city"]
    category = p["category"]
    rows = sorted((q for q in products.values() if q["category"] == category), key=lambda q: q["name"])
    listing = json.dumps([row(q) for q in rows])
    steps = [({"name": "list_products", "arguments": {"category": category}}, listing,
              "I list the %s products." % category)]
    if tier == 3:
        prompt = "Which product in category \"%s\" is the cheapest? Submit {\"product\": \"<name>\"}." % category
        best = min(rows, key=lambda q: q["price"])
        return prompt, steps, {"product": best["name"]}, "The lowest price is %d." % best["price"]
    stock = rng.choice([5, 10, 20])
    rating = rng.choice([3.0, 3.5, 4.0])
    prompt = ("Which product in category \"%s\" with stock >= %d and rating >= %.1f is the cheapest? "
              "Submit {\"product\": \"<name>\"}." % (category, stock, rating))
    ok = [q for q in rows if q["stock"] >= stock and q["rating"] >= rating]
    best = min(ok, key=lambda q: q["price"]) if ok else None
    answer = {"product": best["name"] if best else ""}
    return prompt, steps, answer, "Among those that qualify the cheapest is %s." % answer["product"]


def synthetic_transcripts(count, seed, thinking_fraction=0.3, tiers=(1, 2, 3, 4)):
    """`count` transcripts of the shape described at the top, a pure function of the arguments."""
    rng = random.Random(seed)
    out = []
    products, suppliers = _shop(rng)
    for index in range(count):
        if index % 8 == 0:
            products, suppliers = _shop(rng)
        tier = tiers[index % len(tiers)]
        thinking = rng.random() < thinking_fraction
        prompt, steps, answer, final_reason = _episode(rng, products, suppliers, tier)
        messages = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
        for call, result, reason in steps:
            messages.append({"role": "assistant", "content": "", "reasoning_content": reason, "tool_calls": [call]})
            messages.append({"role": "tool", "content": result})
        messages.append({"role": "assistant", "content": "", "reasoning_content": final_reason,
                         "tool_calls": [{"name": "submit_result",
                                         "arguments": {"answer_text": json.dumps(answer, separators=(",", ":"))}}]})
        text, spans = render_chat(messages, SHOP_TOOLS, thinking)
        out.append({"env": "synthetic_shop", "task": "t%05d" % index, "template": "tier%d" % tier, "tier": tier,
                    "thinking": thinking, "text": text, "spans": spans})
    return out


# ---------------------------------------------------------------------------------------------
# Tokenization and batches


def encode_transcript(tokenizer, record):
    """(ids int32 [T], mask uint8 [T]): mask[i] = 1 when token i is model-generated (in a span)."""
    text, spans = record["text"], record["spans"]
    cuts = sorted({0, len(text)} | {c for span in spans for c in span})
    ids, mask = [], []
    for begin, end in zip(cuts, cuts[1:]):
        inside = any(s <= begin and end <= e for s, e in spans)
        piece = tokenizer.encode(text[begin:end])
        ids.extend(piece)
        mask.extend([1 if inside else 0] * len(piece))
    return np.asarray(ids, dtype=np.int32), np.asarray(mask, dtype=np.uint8)


def without_system_prompt(record):
    """The record with its text cut to BOS + everything from the first <｜User｜> on (spans
    moved with it): the short form the first training steps use (train_policy.py --short-steps)."""
    text = record["text"]
    cut = text.find(tok.USER)
    if cut < 0:
        return record
    shift = cut - len(tok.BOS)
    return dict(record, text=tok.BOS + text[cut:], spans=[[a - shift, b - shift] for a, b in record["spans"]])


_ARGUMENT_VALUE = re.compile(r'string="(?:true|false)">(.*?)</｜DSML｜parameter>', re.S)


def argument_values(tokenizer, record, ids):
    """Per tool-call argument value the model writes (the text between string="..."> and
    </｜DSML｜parameter> inside a span), the indices of the tokens lying wholly inside it and then
    of the token that ends it (the one holding the closing tag's first byte): the names,
    categories and answers a policy has to copy or compute right, and where it has to stop. The
    end counts because in play a small model copying a quoted name out of the prompt goes on
    copying the quote after it; a value is only right with its end."""
    text = record["text"]
    sizes = np.asarray([len(tokenizer.token_bytes(t)) for t in ids])
    ends = np.cumsum(sizes)
    starts = ends - sizes
    out = []
    for begin, end in record["spans"]:
        for match in _ARGUMENT_VALUE.finditer(text, begin, end):
            a = len(text[:match.start(1)].encode("utf-8"))
            b = len(text[:match.end(1)].encode("utf-8"))
            inside = np.flatnonzero((starts >= a) & (ends <= b))
            if len(inside):
                # the next token starts inside the value and, not being inside, ends past it
                out.append(np.append(inside, inside[-1] + 1))
    return out


def _ordinary_ids(tokenizer):
    """The tokenizer's ids that are not special tokens, ascending."""
    special = {tokenizer.vocab[s] for s in tok.SPECIAL_STRINGS if s in tokenizer.vocab}
    return np.asarray([i for i in range(tokenizer.vocab_size) if i not in special])


def copy_sequences(tokenizer, count, half, seed):
    """(ids, masks) of `count` repeat sequences: BOS, `half` token ids drawn uniformly from the
    tokenizer's ordinary ids (no special tokens), then the same ids again, the loss on the repeat.

    Why: a transcript's hard tokens are copies (a name from the prompt into a call, a value from a
    tool result into the answer), a small share of its loss beside the format tokens. Trained on
    transcripts alone, the small model learns the format and then sits at the copy tokens' marginal
    distribution (0 exact names after 400 steps); after a short stage on these sequences it copies
    names within ~30 steps.

    What it teaches (measured, session 9): copying at a FIXED distance (`half`), i.e. a positional
    attention head and an identity output path, not content-based induction. With the distance
    varied per row (random filler before and between the two copies) the same model stayed at
    chance (loss ln V) for 300 steps at lr 2e-3 and 4e-3 (induction_sequences' schedule of rising
    distance ranges does learn it), and a model trained on this fixed-distance
    stage to 100% accuracy did not transfer to key-value recall (`k v k v ... k -> v`). Names
    transfer because in a transcript they sit at nearly fixed positions (after a fixed system
    prompt and prompt opening)."""
    ordinary = _ordinary_ids(tokenizer)
    rng = np.random.default_rng(seed)
    body = ordinary[rng.integers(0, len(ordinary), (count, half))]
    bos = tokenizer.vocab[tok.BOS]
    ids, masks = [], []
    for row in body:
        ids.append(np.concatenate(([bos], row, row)).astype(np.int64))
        mask = np.zeros(1 + 2 * half, dtype=np.float32)
        mask[half + 2:] = 1  # the repeat after its first token, which nothing predicts
        masks.append(mask)
    return ids, masks


def induction_sequences(tokenizer, count, min_distance, max_distance, seed):
    """(ids, masks) of `count` repeat sequences at varied distance: BOS, d ordinary ids drawn
    uniformly, then the same ids again, with d uniform in [min_distance, max_distance] per row; the
    loss on the repeat after its first token.

    Why: a token's next one can then be found only by its content (the ids after its earlier
    occurrence), not at a fixed offset, so this teaches content-based copying (induction). Trained
    at once over the full range of distances the small model stays at chance (copy_sequences says
    so); over short distances first (2-8, then 2-24) it learns within ~400 steps, and copies at
    distances it never saw (measured in session 32: exact 0.94 at 8-40 tokens, 0.28 at 41-80 after
    the 2-24 phase)."""
    ordinary = _ordinary_ids(tokenizer)
    rng = np.random.default_rng(seed)
    bos = tokenizer.vocab[tok.BOS]
    ids, masks = [], []
    for distance in rng.integers(min_distance, max_distance + 1, count):
        body = ordinary[rng.integers(0, len(ordinary), int(distance))]
        ids.append(np.concatenate(([bos], body, body)).astype(np.int64))
        mask = np.zeros(1 + 2 * int(distance), dtype=np.float32)
        mask[int(distance) + 2:] = 1
        masks.append(mask)
    return ids, masks


def with_induction_rows(dataset, fraction, min_distance, max_distance, seed):
    """A dataset of `dataset`'s sequences plus data.induction_sequences rows (distances
    min_distance-max_distance) making up about `fraction` of its tokens, mixed by the batch plan.

    Why: after the copy stage, the transcripts' stages make the model forget copying arbitrary ids
    (the shipped checkpoint repeats a random sequence at chance: train.copy_exactness 0.002-0.011
    at distances 2-120), since a shop's names are two tokens from a 96-word lexicon and need only a
    choice among those. The synth categories' names are 3-5 tokens over the whole vocabulary, so a
    policy for them has to keep copying by content while it learns their turns."""
    if not 0 <= fraction < 1:
        raise ValueError("fraction must be in [0, 1), not %r" % fraction)
    base = Dataset.from_sequences(dataset.tokenizer, dataset.ids, dataset.masks)
    if fraction == 0:
        return base
    wanted = fraction / (1 - fraction) * base.total_tokens
    mean_length = 1 + (min_distance + max_distance)  # 1 + 2 * mean distance
    count = max(1, int(wanted / mean_length))
    ids, masks = induction_sequences(dataset.tokenizer, count, min_distance, max_distance, seed)
    return Dataset.from_sequences(dataset.tokenizer, list(base.ids) + ids, list(base.masks) + masks)


def lookup_sequences(tokenizer, count, records, seed):
    """(ids, masks) of `count` key-value lookup sequences: BOS, `records` records
    `key SEP value... END` (distinct keys, 1-3 value ids, SEP and END fixed per sequence), then a
    query `key SEP` for one of the keys followed by its value and END, the loss on those.

    Why: a number in a tool result sits after a separator shared by every field (`":` in
    `"price":408,"stock":21`), so copying it into the answer needs a match on two tokens (the key
    and the separator), which copy_sequences does not teach.

    Not learnt within this project's CPU budget (session 9): with 3 or 12 records, random or fixed
    (the shop's six field names) keys and digit values, 150-400 steps of ~2-4k tokens left the
    value tokens at their marginal distribution. Kept in the copy stage because it costs little
    and its gradient is the one a longer run needs."""
    ordinary = _ordinary_ids(tokenizer)
    rng = np.random.default_rng(seed)
    bos = tokenizer.vocab[tok.BOS]
    ids, masks = [], []
    for _ in range(count):
        drawn = ordinary[rng.choice(len(ordinary), records + 2, replace=False)]
        keys, sep, end = drawn[:records], drawn[records], drawn[records + 1]
        values = [ordinary[rng.integers(0, len(ordinary), rng.integers(1, 4))] for _ in range(records)]
        row = [bos]
        for key, value in zip(keys, values):
            row += [key, sep, *value, end]
        asked = int(rng.integers(0, records))
        row += [keys[asked], sep]
        mask = [0.0] * len(row) + [1.0] * (len(values[asked]) + 1)
        row += [*values[asked], end]
        ids.append(np.asarray(row, dtype=np.int64))
        masks.append(np.asarray(mask, dtype=np.float32))
    return ids, masks


class Dataset:
    """Tokenized transcripts; `batches` yields length-bucketed batches of about `tokens` tokens."""

    @classmethod
    def from_sequences(cls, tokenizer, ids, masks):
        """A dataset of already tokenized sequences (no transcript records)."""
        dataset = cls(tokenizer, [])
        dataset.ids, dataset.masks = list(ids), list(masks)
        dataset.records = [{} for _ in dataset.ids]
        dataset.lengths = np.asarray([len(i) for i in dataset.ids])
        return dataset

    def __init__(self, tokenizer, records, max_len=None, mark_values=False):
        """mark_values: masks hold 2 (not 1) at the tokens of tool-call argument values
        (argument_values), which the training loss can weigh up (train.Batch value_weight)."""
        self.tokenizer = tokenizer
        self.ids, self.masks, self.records = [], [], []
        self._values = {}
        self._groups = None
        self.dropped = 0
        for record in records:
            ids, mask = encode_transcript(tokenizer, record)
            if max_len is not None and len(ids) > max_len:
                self.dropped += 1
                continue
            if mark_values:
                for inside in self.argument_values(len(self.ids), record, ids):
                    mask[inside] = 2
            self.ids.append(ids)
            self.masks.append(mask)
            self.records.append(record)
        self.lengths = np.asarray([len(i) for i in self.ids])

    def argument_values(self, index, record=None, ids=None):
        """argument_values of transcript `index` (computed once; record and ids while it is being
        added)."""
        if index not in self._values:
            self._values[index] = argument_values(self.tokenizer, record or self.records[index],
                                                  self.ids[index] if ids is None else ids)
        return self._values[index]

    def __len__(self):
        return len(self.ids)

    @property
    def total_tokens(self):
        return int(self.lengths.sum())

    def batch_plan(self, tokens_per_batch, rng):
        """A shuffled list of index lists: sequences of similar length grouped so that the padded
        batch holds at most tokens_per_batch tokens (at least one sequence each)."""
        order = np.argsort(self.lengths + rng.random(len(self.lengths)), kind="stable")
        batches = self._chunks(order, 0, tokens_per_batch)
        rng.shuffle(batches)
        return batches

    def _chunks(self, order, shared, tokens_per_batch):
        """`order` cut into consecutive batches whose computed rows, `shared` rows once plus every
        sequence's rest (its length - shared) padded to the longest, stay within tokens_per_batch
        (at least one sequence each)."""
        batches, current, longest = [], [], 0
        for index in order:
            rest = int(self.lengths[index]) - shared
            if current and shared + max(longest, rest) * (len(current) + 1) > tokens_per_batch:
                batches.append(current)
                current, longest = [], 0
            current.append(int(index))
            longest = max(longest, rest)
        if current:
            batches.append(current)
        return batches

    def prompt_keys(self):
        """Per sequence, the bytes of its ids before its first <｜User｜> token: the system prompt
        with the tool list, the same in every transcript of one toolset (b"" for a sequence
        without a user turn, such as a repeat row)."""
        user = self.tokenizer.vocab.get(tok.USER)
        keys = []
        for ids in self.ids:
            at = np.flatnonzero(np.asarray(ids) == user) if user is not None else []
            keys.append(np.asarray(ids[:int(at[0])], dtype=np.int64).tobytes() if len(at) else b"")
        return keys

    def shared_prefix_plan(self, tokens_per_batch, rng):
        """batch_plan for prefix-shared batches (train.Batch computes a batch's common prefix
        once): sequences grouped by prompt_keys, by similar length within a group, so that the
        computed rows, the group's prompt counted once plus every row's rest padded, are at most
        tokens_per_batch (at least one sequence each). Why: a synth transcript is about 3,800
        tokens, 81% of them the system prompt before the task, so a plain batch of two computes
        that prompt twice; here it is computed once for every transcript of the batch."""
        batches = []
        for prompt_length, members in self._prompt_groups():
            order = members[np.argsort(self.lengths[members] + rng.random(len(members)), kind="stable")]
            batches.extend(self._chunks(order, prompt_length, tokens_per_batch))
        rng.shuffle(batches)
        return batches

    def _prompt_groups(self):
        """[(prompt length in ids, member indices)] per distinct prompt_keys value, computed on the
        first call only (a plan is drawn every pass over the data; the keys are large)."""
        if self._groups is None:
            groups = {}
            for index, key in enumerate(self.prompt_keys()):
                groups.setdefault(key, []).append(index)
            self._groups = [(len(key) // np.dtype(np.int64).itemsize, np.asarray(members))
                            for key, members in groups.items()]
        return self._groups

    def collate(self, indices):
        """(ids int64 [B, L], loss mask float32 [B, L] of targets, lengths) padded with EOS (1)."""
        length = max(int(self.lengths[i]) for i in indices)
        ids = np.full((len(indices), length), 1, dtype=np.int64)
        mask = np.zeros((len(indices), length), dtype=np.float32)
        for row, i in enumerate(indices):
            n = int(self.lengths[i])
            ids[row, :n] = self.ids[i]
            mask[row, :n] = self.masks[i]
        return ids, mask, [int(self.lengths[i]) for i in indices]
