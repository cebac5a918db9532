"""ALFWorld (``AgentBench-ALFWorld-v0``) on alfworld's TextWorld engine; needs the alfworld extra.

Modules: :mod:`.env` (the Gymnasium environment), :mod:`.engine` (the engine and its
memo tables), :mod:`.actions` (AgentBench's action snapping), :mod:`.tasks` (game
sources), :mod:`.games` and :mod:`.rooms` (the generator of the shipped games),
:mod:`.expert` (alfworld's handcoded expert).
"""
