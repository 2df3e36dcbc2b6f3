"""The fast tier (`uv run pytest --fast`, tests/conftest.py) still tests every rule of the
protocol seed (docs/specification.md, Part II): each rule below names the unit-level tests that
hold it, and `--fast` must collect every one of them. Marking one of them `e2e`, moving it under
tests/hostile or tests/jobs, or renaming it fails here until the table names another.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import in_fast_tier

ROOT = Path(__file__).resolve().parent.parent

PROTOCOL = "tests/loop/test_turn_checks.py::"
RULES = "tests/loop/test_run_rules.py::"
RUN = "tests/loop/test_run.py::"
FINAL = "tests/loop/test_final_review.py::"
CHAT = "tests/llm/test_openai_chat.py::"
LIST = "tests/tools/test_list_files.py::"
READ = "tests/tools/test_read_file.py::"
SEARCH = "tests/tools/test_search.py::"
DIFF = "tests/tools/test_diff.py::"

# Each rule of the seed (/work/shared/seed/tool-calling.md), in its order, and its tests.
SEED_RULES: dict[str, list[str]] = {
    # The nine checks of a provider turn.
    "check 1: exactly one choice, at index zero": [
        PROTOCOL + "test_check1_exactly_one_choice",
        PROTOCOL + "test_check1_the_choice_has_index_zero",
    ],
    "check 2: the message role is assistant": [PROTOCOL + "test_check2_message_role_is_assistant"],
    "check 3: finish_reason is a supported primitive": [
        PROTOCOL + "test_check3_unsupported_finish_reasons_end_safely",
        PROTOCOL + "test_check3_non_string_finish_reason_is_an_invalid_response",
    ],
    "check 4: a bounded safe call id and type function": [
        PROTOCOL + "test_check4_call_id_is_bounded_and_safe",
        PROTOCOL + "test_check4_call_type_is_function",
    ],
    "check 5: call ids unique in the turn and across turns": [
        PROTOCOL + "test_check5_duplicate_ids_within_a_turn",
        PROTOCOL + "test_check5_id_reused_from_a_previous_turn",
        RULES + "test_call_ids_must_be_unique_across_turns",
    ],
    "check 6: the call count fits the per-round and total limits": [
        PROTOCOL + "test_check6_per_round_limit",
        PROTOCOL + "test_check6_total_limit_counts_previous_rounds",
    ],
    "check 7: arguments parse as a JSON object": [
        PROTOCOL + "test_check7_arguments_parse_as_one_strict_json_object",
    ],
    "check 8: the name is one of the four tools": [
        PROTOCOL + "test_check8_name_is_one_of_the_four_tools",
    ],
    "check 9: argument models reject extra properties and wrong types": [
        PROTOCOL + "test_check9_argument_models_reject_extra_properties_and_wrong_types",
        "tests/tools/test_arguments.py::test_seed_extra_property_example_is_rejected",
        "tests/tools/test_arguments.py::test_wrong_types_are_rejected_without_coercion",
    ],
    # The round, the results and the conversation.
    "round-atomic validation: no call of an invalid round runs": [
        PROTOCOL + "test_round_atomic_one_invalid_call_fails_the_whole_round",
        RULES + "test_round_atomic_validation_runs_no_call_of_an_invalid_round",
    ],
    "invalid calls are not reflected back to the model": [
        RULES + "test_invalid_calls_are_not_reflected_back_to_the_model",
    ],
    "a tool-level failure is an ok:false result returned to the model": [
        RULES + "test_tool_level_failure_is_returned_to_the_model",
        "tests/tools/test_execute.py::test_tool_failures_are_ok_false_results_with_a_contract_code",
    ],
    "the exact assistant message is kept, results appended in call order": [
        PROTOCOL + "test_assistant_message_is_kept_exactly_as_received",
        RULES + "test_results_are_appended_in_call_order",
    ],
    "the two-round transcript: model, messages, four tools, tool_choice auto": [
        RULES + "test_scripted_model_drives_the_two_round_loop_without_sockets",
        RUN + "test_two_round_transcript_matches_the_seed",
        CHAT + "test_request_body_is_exactly_model_messages_tools_and_tool_choice_auto",
    ],
    "the key travels only in the Authorization header": [
        CHAT + "test_key_travels_only_in_the_authorization_header",
        RUN + "test_key_is_sent_only_in_the_authorization_header",
    ],
    "the four schemas, as the seed prints them": [
        "tests/tools/test_schemas.py::test_tools_serialize_exactly_as_the_seed_prints_them",
        "tests/tools/test_schemas.py::test_each_argument_model_mirrors_its_schema",
    ],
    # The stop turn.
    "stop turn: no native calls": [PROTOCOL + "test_stop_turn_with_native_calls_is_invalid"],
    "stop turn: non-empty string content": [FINAL + "test_content_must_be_a_non_empty_string"],
    "stop turn: valid JSON with no additional fields": [
        FINAL + "test_content_must_be_a_json_object",
        FINAL + "test_no_additional_fields_in_the_review",
        FINAL + "test_no_additional_fields_in_a_finding",
    ],
    "stop turn: at most 100 findings and 100 notes": [
        FINAL + "test_at_most_100_findings",
        FINAL + "test_at_most_100_notes",
    ],
    "stop turn: at most 8 KiB in each text field": [
        FINAL + "test_each_text_field_is_at_most_8_kib_of_utf8",
    ],
    "stop turn: a known severity and a positive or null line": [
        FINAL + "test_unknown_severity_is_rejected",
        FINAL + "test_line_is_positive_integer_or_null",
    ],
    "stop turn: a repository-relative path to an existing regular file inside": [
        FINAL + "test_finding_path_is_repository_relative",
        FINAL + "test_finding_path_is_an_existing_regular_file",
    ],
    "an invalid final review is invalid_model_response": [
        RULES + "test_invalid_final_review_is_an_invalid_model_response",
    ],
    # Limits and stop reasons.
    "max_rounds: eight by default": [
        RULES + "test_max_rounds_ends_after_the_configured_number_of_rounds",
        RULES + "test_default_max_rounds_is_eight",
    ],
    "max_tool_calls: per round and in total": [
        RULES + "test_max_tool_calls_per_round",
        RULES + "test_max_tool_calls_in_total",
    ],
    "accumulated tool content is bounded": [RULES + "test_accumulated_tool_content_is_bounded"],
    "upstream_response_too_large: provider content over 2 MiB": [
        RUN + "test_upstream_response_too_large",
    ],
    "review_timeout: the whole workflow is timed": [
        RUN + "test_review_timeout_covers_a_slow_provider",
    ],
    "unsupported_finish_reason: length, content_filter, null, unknown": [
        RUN + "test_unsupported_finish_reason",
    ],
    "invalid_model_response: a malformed envelope": [
        RUN + "test_malformed_envelope_is_an_invalid_model_response",
    ],
    "opencode_authentication_failed and opencode_rate_limited with Retry-After": [
        CHAT + "test_401_and_403_are_authentication_failures",
        CHAT + "test_429_carries_a_numeric_retry_after",
    ],
    "the provider body is discarded": [CHAT + "test_no_key_or_provider_text_in_errors_or_logs"],
    # list_repository_files.
    "list: resolves inside the checkout": [LIST + "test_list_path_errors"],
    "list: does not follow directory symlinks": [
        LIST + "test_list_does_not_descend_directory_symlinks",
    ],
    "list: skips .git and entries resolving outside": [
        LIST + "test_list_skips_git_lookalikes",
        LIST + "test_list_skips_symlinks_resolving_outside_into_git_dangling_or_looping",
    ],
    "list: lexical order": [LIST + "test_list_is_in_lexical_order"],
    "list: limit and next_cursor": [LIST + "test_list_truncated_page_returns_next_cursor"],
    # read_repository_file.
    "read: rejects absolute, drive, UNC, backslash, NUL, .. and .git paths": [
        READ + "test_read_rejects_unsafe_paths",
    ],
    "read: resolves symlinks before the containment check": [
        READ + "test_read_resolves_symlinks_before_the_containment_check",
    ],
    "read: rejects directories, binary or non-UTF-8 files and files over 1 MiB": [
        READ + "test_read_directories_and_gitlinks_are_not_files",
        READ + "test_read_binary_and_non_utf8_files_are_binary_file",
        READ + "test_read_file_over_1_mib_is_file_too_large",
    ],
    "read: at most 400 numbered lines": [
        READ + "test_read_returns_at_most_400_lines",
        READ + "test_read_content_is_numbered_n_colon_space_text",
    ],
    "read: escaping cannot pass 64 KiB": [
        READ + "test_read_escaping_heavy_content_stays_within_64_kib",
    ],
    # search_repository.
    "search: case-sensitive literal text, never a regular expression": [
        SEARCH + "test_search_never_matches_as_a_regular_expression",
        SEARCH + "test_search_regex_metacharacters_are_literal",
        SEARCH + "test_search_is_case_sensitive",
    ],
    "search: the path rules of read": [SEARCH + "test_search_reuses_the_path_rules"],
    "search: skips binary, oversized and internal files": [
        SEARCH + "test_search_skips_binary_files_and_non_utf8_lines",
        SEARCH + "test_search_skips_files_over_1_mib",
        SEARCH + "test_search_skips_symlinks_gitlinks_lookalikes_and_unspellable_names",
    ],
    "search: one-based lines and bounded excerpts": [
        SEARCH + "test_search_lines_are_one_based",
        SEARCH + "test_search_excerpt_is_bounded_around_the_match",
    ],
    "search: at most 100 matches and 64 KiB": [
        SEARCH + "test_search_stops_at_100_matches",
        SEARCH + "test_search_serialized_result_stays_within_64_kib",
    ],
    # inspect_git_diff.
    "diff: git's exact argument vector, no shell": [
        DIFF + "test_diff_runs_git_with_the_exact_argument_vector",
    ],
    "diff: no system or global configuration, no external diff": [
        DIFF + "test_repository_config_cannot_run_commands_or_change_output",
    ],
    "diff: validated paths": [DIFF + "test_diff_paths_are_validated"],
    "diff: output capped at max_bytes (128 KiB at most)": [
        DIFF + "test_diff_is_capped_at_max_bytes"
    ],
    # The trace.
    "trace: each round's metadata, previews of at most 4 KiB, content not duplicated": [
        RUN + "test_trace_records_each_round_with_bounded_previews",
    ],
    "trace: null unless asked for": [RULES + "test_trace_is_null_unless_asked_for"],
    "trace: no key or local path": [
        RUN + "test_key_is_sent_only_in_the_authorization_header",
        RUN + "test_nothing_secret_or_local_in_logs",
    ],
    "trace: none when the review ends with an error": [
        "tests/cli/test_commands.py::"
        "test_json_failure_prints_the_api_error_body_with_the_termination_reason",
    ],
}


def fast_tier_collects(files: list[str]) -> set[str]:
    """The test ids (parameters stripped) `--fast` keeps in these files, as a pytest process
    collects them: the tier's own selection, not a copy of its rules."""
    command = [sys.executable, "-m", "pytest", "--fast", "--collect-only", "-q"]
    done = subprocess.run(
        [*command, "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line.split("[")[0] for line in done.stdout.splitlines() if "::" in line}


def kept_in_this_session(session: pytest.Session) -> set[str]:
    """The test ids of this session that `--fast` keeps, by the tier's own rule: a whole run
    (either tier) has collected them already, which spares a second collection."""
    return {
        item.nodeid.split("[")[0] for item in session.items if in_fast_tier(item, ROOT / "tests")
    }


def test_every_rule_of_the_seed_names_tests() -> None:
    assert len(SEED_RULES) >= 50
    assert all(SEED_RULES.values())


def test_the_fast_tier_collects_a_test_of_every_rule_of_the_seed(
    request: pytest.FixtureRequest,
) -> None:
    wanted = {test for tests in SEED_RULES.values() for test in tests}
    collected = kept_in_this_session(request.session) & wanted
    if unseen := wanted - collected:  # this session did not collect them: ask a pytest
        collected |= fast_tier_collects(sorted({test.split("::")[0] for test in unseen}))
    missing = {
        rule: [test for test in tests if test not in collected]
        for rule, tests in SEED_RULES.items()
        if not set(tests) <= collected
    }
    assert not missing, (
        f"--fast leaves out tests of these rules (marked e2e, moved, renamed?): {missing}"
    )
