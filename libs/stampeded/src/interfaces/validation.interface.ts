/**
 * The Standard Schema interface, version 1 (https://standardschema.dev): what
 * zod (3.24 and later), valibot, arktype and other schema libraries
 * implement. Declared here, as the specification asks of libraries that
 * accept schemas, so that no schema library is a dependency.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardSchemaResult<Output> | Promise<StandardSchemaResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

/** What a Standard Schema's validate() answers: the value, or what is wrong with it. */
export type StandardSchemaResult<Output> = { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<ArgsIssue> };

/** One thing wrong with a job's args: a message, and where in the args when known. */
export interface ArgsIssue {
  readonly message: string;
  /** Keys from the args' root: `['items', 0, 'sku']`. */
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/**
 * A task's own check of its args: returns what is wrong with them (issues,
 * as messages or ArgsIssue objects; `false` for "invalid" without a reason),
 * or nothing (or `true`) when they are valid, or throws to refuse them with
 * the error's message. May be async.
 *
 * @example class-validator and class-transformer
 * validate: (args) =>
 *   validateSync(plainToInstance(SendEmailArgs, args)).flatMap((e) => Object.values(e.constraints ?? {}).map((m) => `${e.property}: ${m}`))
 */
export type ArgsValidateHook = (args: unknown) => ArgsValidateAnswer | Promise<ArgsValidateAnswer>;

export type ArgsValidateAnswer = ReadonlyArray<string | ArgsIssue> | boolean | null | undefined | void;
