/**
 * A TracerProvider of @opentelemetry/api, described by the one method that
 * Stampeded calls: the option's type must not need the package, which is an
 * optional peer dependency.
 */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): unknown;
}

export interface TracingOptions {
  /** Where the spans go. Default: the globally registered provider (NodeSDK, `provider.register()`). */
  tracerProvider?: TracerProviderLike;
  /** The tracer's name (the instrumentation scope). Default '@stampeded/nestjs'. */
  tracerName?: string;
  /**
   * How an execution's span relates to the enqueue's. `'parent'`: a child of
   * the enqueue's span, in the enqueue's trace, and linked to it as well.
   * `'link'`: the root of a trace of its own, linked to the enqueue's span.
   * Default `'parent'`.
   */
  parent?: 'parent' | 'link';
}
