"""A flow run's own Prefect artifacts (the server's unfiltered list is paged: a busy test server pushes a run's
artifacts past its first page), and the three small documents the flow tests build from."""

from __future__ import annotations

import json

DOCS = [
    {"id": 1, "title": "Graphs", "text": "A graph has nodes. A graph has edges.\nEdges link nodes."},
    {"id": 2, "title": "模型", "text": "模型需要数据。数据来自文档！"},
    {"id": 3, "text": ""},
]


def flow_artifacts(state) -> dict[str, object]:
    """{key: data} of the artifacts the flow run behind `state` created (table data decoded)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        by_run = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
        found = client.read_artifacts(artifact_filter=by_run)
    return {a.key: json.loads(a.data) if a.type == "table" and isinstance(a.data, str) else a.data for a in found}


def task_runs_since(name: str, since) -> int:
    """How many runs of the task `name` (named `<name>-<suffix>`) started at `since` (a datetime) or later, on the
    test's Prefect server."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName, TaskRunFilterStartTime

    found = TaskRunFilter(name=TaskRunFilterName(like_=name), start_time=TaskRunFilterStartTime(after_=since))
    with get_client(sync_client=True) as client:
        return len(client.read_task_runs(task_run_filter=found, limit=200))


def task_run_states(state) -> list[tuple[str, str]]:
    """(task name, state name) of every task run of the flow run that returned `state` (`return_state=True`),
    sorted. A stage task that reused its complete output ends `Cached`, one that computed it `Completed`."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    # The server records task runs and their states from events, after the flow has returned: under
    # load a run can still lack its state. Read until every run has a final state and two reads agree.
    flow_filter = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
    previous, deadline = None, time.monotonic() + 60
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=flow_filter)
            final = all(run.state is not None and run.state.is_final() for run in runs)
            got = sorted((run.name.rsplit("-", 1)[0], run.state.name if run.state else "") for run in runs)
            if (final and got == previous) or time.monotonic() > deadline:
                return got
            previous = got
            time.sleep(0.25)


def task_states(state) -> dict[str, str]:
    """{task name: state name} for a flow run that calls each task once (see `task_run_states`)."""
    runs = task_run_states(state)
    states = dict(runs)
    assert len(states) == len(runs), f"a task ran more than once, use task_run_states: {runs}"
    return states
