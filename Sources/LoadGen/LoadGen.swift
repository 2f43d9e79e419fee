/// Namespace for the load generator behind `understudy load` (see docs/architecture.md).
public enum LoadGen {}
