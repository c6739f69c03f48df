"""Controlled vocabularies and memory templates of TGT template mode (paper App. B.6).

Private to :mod:`scrubjay.bench.tgt`. The vocabulary *sizes* are the paper's; the words
were lost in extraction and are chosen here, as are the three pools marked "not in the
paper's list". Values are picked so that two different values of one pool never share 60%
of their tokens (the factual judge's threshold), and the words of ``FUTURE_TASKS`` appear in
no memory text or context (so that no query word pins a memory on its own).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CATEGORIES", "CATEGORY_BY_KEY", "FUTURE_TASKS", "Category"]

# ---------------------------------------------------------------------------
# Controlled vocabularies (App. B.6). The sizes are the paper's; the words were lost in
# extraction and are chosen here. Values are picked so that two different values of one
# pool never share 60% of their tokens (the factual judge's threshold).
# ---------------------------------------------------------------------------

NAMES = (
    "Priya", "Tomas", "Amara", "Kenji", "Lucia", "Omar",
    "Freya", "Mateo", "Ingrid", "Ravi", "Sofia", "Dmitri",
)  # 12 names (paper size; words chosen)
OFFICE_AREAS = (
    "north atrium", "quiet library", "hardware lab",
    "rooftop lounge", "west annex", "garden cafe",
)  # 6 office areas (paper size; words chosen)
CITIES = ("Lisbon", "Toronto", "Nairobi", "Osaka", "Denver", "Tallinn")  # 6 (paper size)
PROJECT_CODENAMES = (
    "Falcon", "Juniper", "Basalt", "Marigold", "Tundra", "Quasar",
)  # 6 project codenames (paper size; words chosen)
FILENAMES = (
    "scheduler.py", "billing_api.rb", "auth_middleware.ts",
    "index_builder.rs", "report_export.sql",
)  # 5 filenames (paper size; words chosen)
LANGUAGES = ("Rust", "Python", "Kotlin", "TypeScript", "Elixir")  # 5 (paper size)
DEV_TOOLS = ("Neovim", "Emacs", "Sublime Text", "Zed", "IntelliJ IDEA")  # 5 (paper size)
DATA_STORES = ("PostgreSQL", "Redis", "DuckDB", "Cassandra", "SQLite")  # 5 (paper size)
FRAMEWORKS = ("Django", "FastAPI", "React", "Svelte", "Phoenix")  # 5 (paper size)
FOODS = ("ramen", "falafel wraps", "poke bowls", "masala dosa", "mushroom risotto")  # 5
COMMUNICATION_STYLES = (
    "brief bullet points", "detailed written memos",
    "quick voice calls", "async video updates",
)  # 4 communication styles (paper size; words chosen)
AESTHETIC_PREFERENCES = (
    "dark minimalist themes", "high contrast layouts",
    "warm pastel palettes", "dense monospace dashboards",
)  # 4 aesthetic preferences (paper size; words chosen)
COMPANIES = (
    "Northwind Labs", "Bluefin Analytics", "Kestrel Robotics",
    "Orchid Health", "Cobalt Freight", "Lumen Games",
)  # 6 companies (paper size; words chosen)
UNIVERSITIES = ("ETH Zurich", "McGill", "Caltech", "Sorbonne", "Tsinghua")  # 5 (paper size)
CHILD_NAMES = ("Mira", "Leo", "Anouk", "Tariq", "Elsa", "Bodhi")  # 6 (paper size)
LONG_TERM_GOALS = (
    "found a robotics startup", "publish a fantasy novel",
    "run an ultramarathon", "lead a research lab",
)  # 4 long-term goals (paper size; words chosen)
BUILD_STATUSES = ("passing", "failing", "queued", "cancelled")  # 4 (paper size)
MOOD_DESCRIPTORS = ("frazzled", "upbeat", "drained", "restless")  # 4 (paper size)

# Pools NOT in the paper's list (chosen; needed by categories the list does not cover).
WORKING_HOURS = ("early mornings", "late evenings", "long afternoons", "split shifts")
TODAY_TASKS = ("demo", "rollout", "handoff", "postmortem", "triage")
FUTURE_TASKS = (
    "the annual offsite",
    "next quarter's roadmap",
    "a handover document",
    "the onboarding checklist",
    "a performance appraisal",
    "the incident retrospective",
)  # the {future_task} slot of the prospective template

TODAYS_PLAN_VALUES = tuple(f"{c} {t}" for c in PROJECT_CODENAMES for t in TODAY_TASKS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Category:
    """Template for the memories of one category."""

    key: str
    attribute: str  # noun phrase shared by memory text and queries
    values: tuple[str, ...]
    template: str  # fields: s (subject), v (value), codename, alt (another value)
    contexts: tuple[str, ...]  # fields: s, codename, area


CATEGORIES = (
    # --- Type A: ephemeral ---------------------------------------------------------
    Category(
        key="current_location",
        attribute="current work spot",
        values=OFFICE_AREAS,
        template="{s}'s current work spot is the {v} for the rest of the day.",
        contexts=("desk-booking chat with {s}", "hallway check-in with {s} near the {area}"),
    ),
    Category(
        key="todays_plan",
        attribute="plan for today",
        values=TODAYS_PLAN_VALUES,
        template="{s}'s plan for today is the {v}, squeezed in before lunch.",
        contexts=("morning stand-up thread with {s}", "#standup channel post by {s}"),
    ),
    Category(
        key="transient_mood",
        attribute="mood right now",
        values=MOOD_DESCRIPTORS,
        template="{s}'s mood right now is {v} after a hectic start.",
        contexts=("one-on-one chat with {s}", "team chat banter with {s}"),
    ),
    Category(
        key="immediate_context",
        attribute="currently open file",
        values=FILENAMES,
        template="{s}'s currently open file is {v}, with the cursor on a failing assertion.",
        contexts=("IDE assistant chat with {s}", "pairing call with {s} on {codename}"),
    ),
    Category(
        key="real_time_status",
        attribute="branch build status",
        values=BUILD_STATUSES,
        template="{s}'s branch build status is {v} at this moment.",
        contexts=("#ci-alerts bot message about {s}'s branch", "build dashboard chat with {s}"),
    ),
    # --- Type B: session-specific --------------------------------------------------
    Category(
        key="project_decision",
        attribute="chosen datastore",
        values=DATA_STORES,
        template="{s}'s chosen datastore for the {codename} service is {v}, "
        "settled in the design review.",
        contexts=("{codename} design review notes", "architecture channel thread with {s}"),
    ),
    Category(
        key="meeting_outcome",
        attribute="action item from the last sync",
        values=FILENAMES,
        template="{s}'s action item from the last sync is to profile {v} "
        "before the {codename} handoff.",
        contexts=("{codename} sync minutes", "follow-up chat with {s} after the {codename} sync"),
    ),
    Category(
        key="recent_preference_shift",
        attribute="newly preferred framework",
        values=FRAMEWORKS,
        template="{s}'s newly preferred framework is {v}, after moving away from {alt}.",
        contexts=("frontend guild chat with {s}", "retro notes for {codename}"),
    ),
    Category(
        key="active_bug",
        attribute="open bug",
        values=FILENAMES,
        template="{s}'s open bug is a crash in {v} that blocks the {codename} release.",
        contexts=("issue tracker comment by {s}", "on-call notes from {s}"),
    ),
    Category(
        key="short_term_goal",
        attribute="goal for this sprint",
        values=LANGUAGES,
        template="{s}'s goal for this sprint is to port the {codename} exporter to {v}.",
        contexts=("sprint planning notes for {codename}", "planning board comment by {s}"),
    ),
    # --- Type C: durable preference ------------------------------------------------
    Category(
        key="food_preference",
        attribute="favourite lunch",
        values=FOODS,
        template="{s}'s favourite lunch is {v}, ordered whenever the team eats together.",
        contexts=("team lunch thread", "catering survey reply from {s}"),
    ),
    Category(
        key="communication_style",
        attribute="preferred communication style",
        values=COMMUNICATION_STYLES,
        template="{s}'s preferred communication style is {v} rather than long meetings.",
        contexts=("manager one-on-one notes about {s}", "team working agreement"),
    ),
    Category(
        key="tool_preference",
        attribute="preferred editor",
        values=DEV_TOOLS,
        template="{s}'s preferred editor is {v} for nearly all coding work.",
        contexts=("developer environment survey reply from {s}", "new-starter notes for {s}"),
    ),
    Category(
        key="working_hours",
        attribute="preferred working hours",
        values=WORKING_HOURS,
        template="{s}'s preferred working hours are {v}, as noted in the team calendar.",
        contexts=("calendar settings chat with {s}", "team working agreement"),
    ),
    Category(
        key="aesthetic_preference",
        attribute="preferred interface look",
        values=AESTHETIC_PREFERENCES,
        template="{s}'s preferred interface look is {v} across every app.",
        contexts=("design system feedback from {s}", "UI settings chat with {s}"),
    ),
    # --- Type D: stable knowledge --------------------------------------------------
    Category(
        key="occupation",
        attribute="employer",
        values=COMPANIES,
        template="{s}'s employer is {v}, where {s} has worked for many years.",
        contexts=("profile introduction by {s}", "networking chat with {s}"),
    ),
    Category(
        key="location",
        attribute="home city",
        values=CITIES,
        template="{s}'s home city is {v}, where {s} has lived for over a decade.",
        contexts=("profile introduction by {s}", "travel planning chat with {s}"),
    ),
    Category(
        key="long_term_goal",
        attribute="long-term goal",
        values=LONG_TERM_GOALS,
        template="{s}'s long-term goal is to {v} one day.",
        contexts=("career development chat with {s}", "mentoring notes about {s}"),
    ),
    Category(
        key="family_info",
        attribute="child's name",
        values=CHILD_NAMES,
        template="{s}'s child's name is {v}, a frequent topic in friendly chats.",
        contexts=("personal catch-up with {s}", "holiday planning chat with {s}"),
    ),
    Category(
        key="education",
        attribute="alma mater",
        values=UNIVERSITIES,
        template="{s}'s alma mater is {v}, where {s} earned a degree.",
        contexts=("profile introduction by {s}", "alumni event chat with {s}"),
    ),
)
CATEGORY_BY_KEY = {c.key: c for c in CATEGORIES}
