"""One sub-package per AgentBench task: os, db, kg, alfworld, webshop."""
