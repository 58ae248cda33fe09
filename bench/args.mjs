// The benchmark scripts' command line: `--name value` options and `--name`
// flags, after the script's path.
export const args = process.argv.slice(2);

/** The value given after `--name`, or `fallback` when there is none. */
export const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};

/** Whether `--name` was given. */
export const flag = (name) => args.includes(`--${name}`);
