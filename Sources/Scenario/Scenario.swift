/// Namespace for scripted stage tests behind `understudy scenario` (see docs/architecture.md).
public enum ScenarioRunner {}
