"""Reading a Prometheus text-format scrape in tests: every sample by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


def samples(text: str) -> dict[tuple[str, Labels], float]:
    """`{(sample name, sorted labels): value}` of a scrape (the parser rejects bad text)."""
    found: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in found, f"the sample {key} appears twice"
            found[key] = sample.value
    return found


def families(text: str) -> set[str]:
    """The family names a scrape declares."""
    return {family.name for family in text_string_to_metric_families(text)}


def value(text: str, name: str, **labels: str) -> float:
    """One sample's value; 0 when the scrape has no such sample."""
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


def label_values(text: str, label: str) -> set[str]:
    """Every value `label` takes anywhere in the scrape."""
    return {dict(labels)[label] for (_, labels) in samples(text) if label in dict(labels)}
