import { Inject } from '@nestjs/common';
import { DEFAULT_QUEUE } from '../stampeded.constants.js';

/** The injection token of a queue registered with StampededModule.registerQueue(). */
export const getQueueToken = (name: string = DEFAULT_QUEUE): string => `StampededQueue:${name}`;

/** Injects the handle of a queue registered with StampededModule.registerQueue(). */
export const InjectQueue = (name?: string): ParameterDecorator & PropertyDecorator => Inject(getQueueToken(name));
