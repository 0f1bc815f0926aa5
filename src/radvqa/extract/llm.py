"""LLM backend: the same Extraction, filled by an OpenAI-compatible chat-completions server (vLLM,
Ollama, llama.cpp server, hosted APIs) with a JSON-schema response format.

HTTP goes through the shared client :class:`radvqa.llm.ChatClient` (the ``openai`` package), the
cache is the shared :class:`radvqa.llm.cache.AnswerCache`.
- sections and sentences (with offsets) come from the same splitter as the rules backend; the
  model returns observations whose ``evidence`` quotes report text, located back to offsets;
- one request per report, ``concurrency`` requests in flight, results in input order;
- retries with exponential backoff on network errors, timeouts, HTTP 429 and 5xx (in the client);
- a response that is not valid JSON for the schema is retried; after ``retries`` attempts the
  report gets ``Extraction.error`` (never dropped);
- on-disk cache keyed by model + prompt version + report text (``cache_dir``), valid answers only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from radvqa.llm.cache import AnswerCache, key_of
from radvqa.llm.client import ChatClient, redact_url
from radvqa.extract.sections import section_role, split_sections
from radvqa.extract.sentences import split_sentences
from radvqa.extract.text import MAX_CHARS, check_text
from radvqa.model import Extraction, Indication, Observation, Report, Sentence, Span
from radvqa.extract import EXTRACTORS

# 2: alternatives, qualified negatives (`qualifier`), scope, sides, chest only
# 3: round 11b (issue 13): "apparent" hedges, "no lobar X" is qualified, one combined device
#    ("pacemaker/defibrillator"), an alternative between ages states none, a bare "line" and
#    "supine" name no device / no portable technique, "no X with <side/size> Y" leaves Y present
PROMPT_VERSION = "3"

# The conventions are the rules backend's (radvqa/extract/README.md); keep the two in step.
SYSTEM_PROMPT = """You are a radiology information-extraction system. Read the chest X-ray report \
and list every finding it states as present, absent (negated) or uncertain (possible, cannot be \
excluded). Use only the finding ids and region ids given. One observation per finding, side and \
region. Quote the exact report words that state each observation in "evidence". Findings that \
are only asked about in the indication or history go in "indication_evaluate", not in \
"observations". Conventions:
- Alternatives ("X or Y", "X versus Y", "X/Y", "X and/or Y", and lists after "could represent", \
"may reflect", "differential includes") make each named alternative "uncertain", never "absent"; \
the sign they explain ("opacity", "density") keeps its own certainty.
- "Probable", "apparent", "suggests" and the like hedge: "apparent cardiomegaly" is "uncertain".
- Qualified negatives ("no large effusion", "no definite consolidation", "no displaced fracture", \
"no typical findings of edema", "no significant ...", "no lobar pneumonia", "grossly clear") are \
"uncertain" with "qualifier" set to the limiting word(s) ("large", "definite", "displaced", \
"typical findings of", "significant", "lobar", "gross"). Plain negatives ("no focal \
consolidation", "no acute fracture") are "absent" with "qualifier" null. "qualifier" is null \
everywhere else. A negation does not reach a finding opened by "with" and a side or size ("no \
cardiomegaly with bilateral small pleural effusions": the effusions are present).
- Recommendations, "rule out X", "to exclude X", "evaluate for X" are not observations. \
"Resolving X" is X present with change "improved". A modifier (severity, change, temporal) comes \
only from the finding's own phrase, never from a negated phrase ("emphysema without acute \
disease": emphysema has no temporal value).
- Sides: a side or location governs every finding coordinated with it ("scarring or atelectasis \
in the left base": both left); "lung bases", "bibasilar", "both lungs", "biapical", \
"bilaterally" are "bilateral"; a side stated on the finding beats a side mentioned elsewhere in \
the sentence.
- Only the chest: findings about other body parts of a combined report are left out.
- Devices keep their own id (a tracheostomy tube is not an endotracheal tube); monitor leads are \
not implanted devices; two devices of one family joined by "/" are one combined device, not \
alternatives ("pacemaker/defibrillator": both present); a bare "line" is a device only with a \
device's words ("line position", "lines and tubes"; not "fracture line", "midaxillary line"); \
"supine" or "upright" is no portable technique; "lung lines" is not a line; an alternative \
between ages ("acute or subacute", "age indeterminate") gives no temporal value; body jewelry is not a nipple shadow; a \
measurement belongs to the phrase it measures. "Sequela of prior X" and "old X" have temporal \
"old" and are not active X.
Answer with JSON only."""


class _LLMObs(msgspec.Struct):
    finding: str
    certainty: str
    laterality: str | None = None
    regions: list[str] = []
    severity: str | None = None
    size_mm: float | None = None
    change: str | None = None
    temporal: str | None = None
    qualifier: str | None = None
    evidence: str = ""


class _LLMOut(msgspec.Struct):
    observations: list[_LLMObs]
    indication_evaluate: list[str] = []


class LLMError(RuntimeError):
    pass


def response_schema(finding_ids: list[str], region_ids: list[str]) -> dict[str, Any]:
    """JSON schema of the answer: the scene-graph observation fields, ids as enums."""
    nullable = lambda t: {"type": [t, "null"]}  # noqa: E731
    obs = {
        "type": "object",
        "properties": {
            "finding": {"type": "string", "enum": finding_ids},
            "certainty": {"type": "string", "enum": ["present", "absent", "uncertain"]},
            "laterality": {"type": ["string", "null"], "enum": ["left", "right", "bilateral", None]},
            "regions": {"type": "array", "items": {"type": "string", "enum": region_ids}},
            "severity": nullable("string"),
            "size_mm": nullable("number"),
            "change": {"type": ["string", "null"], "enum": ["new", "increased", "decreased", "unchanged",
                                                           "resolved", "improved", "worsened", None]},
            "temporal": {"type": ["string", "null"], "enum": ["acute", "chronic", "old", "healed", "healing", None]},
            # the limiting word(s) of a qualified negative ("no large effusion" -> "large")
            "qualifier": nullable("string"),
            "evidence": {"type": "string"},
        },
        "required": ["finding", "certainty", "laterality", "regions", "severity", "size_mm", "change", "temporal",
                     "qualifier", "evidence"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "observations": {"type": "array", "items": obs},
            "indication_evaluate": {"type": "array", "items": {"type": "string", "enum": finding_ids}},
        },
        "required": ["observations", "indication_evaluate"],
        "additionalProperties": False,
    }


@EXTRACTORS.register("llm")
class LLMExtractor:
    def __init__(self, ontology: Any = None, *, url: str, model: str, api_key: str | None = None,
                 concurrency: int = 8, timeout: float = 120.0, retries: int = 3, backoff: float = 1.0,
                 cache_dir: str | Path | None = None, max_chars: int = MAX_CHARS, temperature: float = 0.0):
        if ontology is None:
            from radvqa.ontology import load_ontology

            ontology = load_ontology()
        if not url or not model:
            raise ValueError("the llm extractor needs url= (OpenAI-compatible base URL) and model=")
        self.ontology = ontology
        self.model = model
        self.api_key = api_key
        self.concurrency = max(1, int(concurrency))
        self.timeout = timeout
        self.retries = max(1, int(retries))
        self.backoff = backoff
        self.max_chars = max_chars
        self.temperature = temperature
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._cache = AnswerCache(self.cache_dir) if self.cache_dir else None
        # transport failures are retried inside the client; ``retries`` also bounds invalid answers
        self._client = ChatClient(url, api_key=api_key, timeout_s=timeout, max_retries=self.retries - 1,
                                  backoff_base_s=backoff, backoff_max_s=max(backoff * 8, 0.0))
        self.url = redact_url(self._client.base_url) + "/chat/completions"  # for display: no credentials
        self.version = f"llm:{model}:{PROMPT_VERSION}"
        self._findings = sorted(ontology.findings)
        self._regions = sorted(ontology.regions)
        self._schema = response_schema(self._findings, self._regions)
        lines = [f"- {fid}: {f.name}" + (f" ({', '.join(f.synonyms[:4])})" if f.synonyms else "")
                 for fid, f in sorted(ontology.findings.items())]
        self._vocab = ("Finding ids:\n" + "\n".join(lines) + "\n\nRegion ids: " + ", ".join(self._regions))

    # ---- public -------------------------------------------------------------------------------
    def extract(self, text: object, study_id: str = "") -> Extraction:
        return next(self.extract_many([(study_id, text)]))

    def extract_many(self, items: Iterable[tuple[str, object]], batch_size: int = 64) -> Iterator[Extraction]:
        """Extractions in input order; ``concurrency`` requests in flight within each batch."""
        batch: list[tuple[str, object]] = []
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for item in items:
                batch.append(item)
                if len(batch) >= batch_size:
                    yield from pool.map(lambda it: self._one(it[1]), batch)
                    batch = []
            if batch:
                yield from pool.map(lambda it: self._one(it[1]), batch)

    # ---- internals ----------------------------------------------------------------------------
    def _report(self, text: str) -> Report:
        sections = split_sections(text)
        sentences: list[Sentence] = []
        for sec in sections:
            sentences.extend(split_sentences(text, sec.start, sec.end, sec.name, len(sentences) + 1))
        return Report(text=text, sections=sections, sentences=sentences)

    def _one(self, raw: object) -> Extraction:
        text, error = check_text(raw, self.max_chars)
        if error is not None:
            return Extraction(report=Report(text=""), extractor=self.version, error=error)
        report = self._report(text)
        try:
            out = self._ask(text)
        except LLMError as e:
            return Extraction(report=report, extractor=self.version, error=str(e))
        return self._build(report, out)

    def cache_key(self, text: str) -> str:
        return key_of(self.model, PROMPT_VERSION, text)

    def _ask(self, text: str) -> _LLMOut:
        key = self.cache_key(text)
        hit = self._cache.get(key) if self._cache is not None else None
        if hit is not None:
            try:
                return msgspec.convert(hit.get("out"), type=_LLMOut)
            except msgspec.ValidationError:
                pass  # a damaged cache entry is re-asked
        body = {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT + "\n\n" + self._vocab},
                {"role": "user", "content": "Report:\n" + text},
            ],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "scene_graph_observations", "strict": True, "schema": self._schema}},
        }
        last = "no attempt"
        for _ in range(self.retries):
            res = self._client.chat(body)
            if res.error is not None or res.content is None:
                # the client already retried what retrying can fix
                raise LLMError(f"llm extraction failed: {res.error}")
            try:
                out = msgspec.json.decode(res.content.encode("utf-8"), type=_LLMOut)
                self._validate(out)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as e:
                last = f"invalid JSON from the model: {e}"
                continue
            if self._cache is not None:
                self._cache.put(key, {"out": msgspec.to_builtins(out)})
            return out
        raise LLMError(f"llm extraction failed after {self.retries} attempt(s): {last}")

    def _validate(self, out: _LLMOut) -> None:
        findings = self.ontology.findings
        regions = self.ontology.regions
        for o in out.observations:
            if o.finding not in findings:
                raise ValueError(f"unknown finding id {o.finding!r}")
            if o.certainty not in ("present", "absent", "uncertain"):
                raise ValueError(f"bad certainty {o.certainty!r}")
            if o.laterality not in (None, "left", "right", "bilateral"):
                raise ValueError(f"bad laterality {o.laterality!r}")
            if o.temporal not in (None, "acute", "chronic", "old", "healed", "healing"):
                raise ValueError(f"bad temporal {o.temporal!r}")
            bad = [r for r in o.regions if r not in regions]
            if bad:
                raise ValueError(f"unknown region id(s) {bad}")
        bad = [f for f in out.indication_evaluate if f not in findings]
        if bad:
            raise ValueError(f"unknown finding id(s) in indication_evaluate {bad}")

    def _build(self, report: Report, out: _LLMOut) -> Extraction:
        text = report.text
        lower = text.lower() if len(text.lower()) == len(text) else text
        obs: list[Observation] = []
        for n, o in enumerate(out.observations, 1):
            ev: list[Span] = []
            q = " ".join(o.evidence.split()).lower()
            if q:
                i = lower.find(q)
                if i >= 0:
                    sid = next((s.id for s in report.sentences if s.start <= i < s.end), None)
                    ev.append(Span(start=i, end=i + len(q), text=text[i:i + len(q)], sentence_id=sid))
            # a qualified negative is uncertain by definition, whatever certainty the model put
            qual = " ".join((o.qualifier or "").split()) or None
            cert = "uncertain" if qual else o.certainty
            obs.append(Observation(id=f"O{n:02d}", finding=o.finding, certainty=cert, laterality=o.laterality,
                                   regions=list(o.regions), severity=o.severity, size_mm=o.size_mm, change=o.change,
                                   temporal=o.temporal, evidence=ev, qualifier=qual))
        ind_sents = [s for s in report.sentences if section_role(s.section) == "indication"]
        indication = None
        if ind_sents or out.indication_evaluate:
            indication = Indication(text=" ".join(s.text for s in ind_sents), evaluate=list(out.indication_evaluate))
        return Extraction(report=report, observations=obs, indication=indication, extractor=self.version)
