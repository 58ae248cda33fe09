import type { FactoryProvider, InjectionToken, OptionalFactoryDependency, Provider, Type } from '@nestjs/common';

// The metadata keys Nest 11 and 12 read a constructor's dependencies from (@nestjs/common's constants), named here so
// that the package needs no deep import of Nest.
const PARAMTYPES_METADATA = 'design:paramtypes';
const SELF_DECLARED_DEPS_METADATA = 'self:paramtypes';
const OPTIONAL_DEPS_METADATA = 'optional:paramtypes';

/** How a token is named in a named instance's scope: `Stampeded:<instance>:<key>`. */
export const scopedTokenName = (instance: string, key: string): string => `Stampeded:${instance}:${key}`;

function keyOf(token: unknown): string {
  if (typeof token === 'function') return token.name;
  if (typeof token === 'symbol') return token.description ?? String(token);
  return String(token);
}

/**
 * A named instance's providers under tokens of its own: every token in
 * `scoped` (the instance's classes and option tokens) becomes a string of
 * the instance's name, in what each provider provides and in what it
 * injects. Only the default instance provides the classes themselves, so
 * that `app.get(QueueService)`, which answers with the last module that
 * provides a token, always means the default instance, and no provider of
 * another instance can answer for it. Classes are built by a factory from
 * the dependencies their constructors declare, as Nest itself reads them.
 */
export function scopeProviders(instance: string, providers: Provider[], scoped: ReadonlySet<unknown>): Provider[] {
  const rename = (token: unknown): InjectionToken => (scoped.has(token) ? scopedTokenName(instance, keyOf(token)) : (token as InjectionToken));
  const dependency = (dep: InjectionToken | OptionalFactoryDependency): InjectionToken | OptionalFactoryDependency => {
    if (typeof dep === 'object' && dep !== null && 'token' in dep) return scoped.has(dep.token) ? { token: rename(dep.token), optional: dep.optional } : dep;
    return rename(dep);
  };
  return providers.map((provider): Provider => {
    if (typeof provider === 'function') return classFactory(provider, rename);
    if ('useFactory' in provider) {
      const factory = provider as FactoryProvider;
      return { provide: rename(factory.provide), inject: (factory.inject ?? []).map(dependency), useFactory: factory.useFactory };
    }
    if ('useValue' in provider) return { provide: rename(provider.provide), useValue: provider.useValue };
    if ('useExisting' in provider) return { provide: rename(provider.provide), useExisting: rename(provider.useExisting) };
    return classFactory(provider.useClass, rename, rename(provider.provide));
  });
}

function classFactory(type: Type<unknown>, rename: (token: unknown) => InjectionToken, provide: InjectionToken = rename(type)): FactoryProvider {
  const params: unknown[] = Reflect.getMetadata(PARAMTYPES_METADATA, type) ?? [];
  const declared: { index: number; param: unknown }[] = Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, type) ?? [];
  const optional: number[] = Reflect.getMetadata(OPTIONAL_DEPS_METADATA, type) ?? [];
  const inject = params.map((param, index) => {
    const token = rename(declared.find((d) => d.index === index)?.param ?? param);
    return optional.includes(index) ? { token, optional: true } : token;
  });
  return { provide, inject, useFactory: (...args: unknown[]) => new (type as new (...a: unknown[]) => unknown)(...args) };
}
