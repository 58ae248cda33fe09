import { Catch, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { InspectorInputError } from '../inspector/inspector-input.js';

/** A filter or id the operator got wrong is a 400 with the reason, not a 500. */
@Catch(InspectorInputError)
export class InspectorErrorFilter implements ExceptionFilter {
  catch(error: InspectorInputError, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<ServerResponse>();
    response.statusCode = 400;
    response.setHeader('Content-Type', 'application/json; charset=utf-8');
    response.end(JSON.stringify({ statusCode: 400, error: 'Bad Request', message: error.message }));
  }
}
