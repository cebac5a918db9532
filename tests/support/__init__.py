"""What the tests share: servers, test-only tasks, fixtures and workers; no tests here.

The test files import these as ``support.<module>`` (pytest puts ``tests/`` on
``sys.path``; a subprocess that needs them gets ``tests/`` on its ``PYTHONPATH``), and
the test-only tasks are registered under that name (``support.trainer_test_envs:Echo-v0``).

- ``chat_servers``: a scripted OpenAI-compatible chat server on loopback, for
  ``eval --endpoint`` and the hostile-endpoint tests (the ``serve_chat`` fixture).
- ``db_servers``: where the DB tests find the real MariaDB and PostgreSQL servers, and
  the skip when one does not answer.
- ``handmade_runs``: run directories written by hand in the layout of docs/trainer.md,
  with known diagnostics, for the report and compare tests.
- ``kg_fixtures``: a tiny hand-made knowledge graph and tool-call helpers for the KG tests.
- ``os_backends``: which OS sandbox backends (bubblewrap, Docker) can run here, for the
  OS tests' parametrized fixtures.
- ``os_calls``: the OS env's tool calls (``bash``, ``answer``) as the OS tests write them.
- ``os_sweeps``: one sweep of a shipped OS split per test session, shared by the OS
  asset and expected-answer tests.
- ``processes``: process checks (a zombie counts as gone) and the OS sandboxes running
  under a process.
- ``scale_fsdp_worker``: one policy update, single-process or as an FSDP2 rank; run as
  a script under torchrun, and called by the Ray tests.
- ``secret_env``: a minimal "say the secret word" task that pins the base
  environment's contract.
- ``serving_support``: serving test servers in a thread of the test process.
- ``sglang_loopback``: a loopback HTTP server speaking SGLang's native API over a real
  tiny model (SGLang cannot run on a CPU).
- ``trainer_test_envs``: two small learnable tasks (echo, lookup) for the trainer's tests.
- ``trl_tiny``: a real TRL ``GRPOTrainer`` on a tiny model, shared by the TRL adapter tests.
- ``vector_test_envs``: test-only tasks for the vector env whose tools cause its faults
  (a slow step, a dying worker, leftover episode resources).
- ``verl_adapter_checks``: the verl adapter's tests, run in the verl venv by
  ``tests/test_adapters_verl_venv.py`` (its name keeps the main run from collecting it).
- ``webshop_support``: playing a WebShop episode with a policy.
"""
