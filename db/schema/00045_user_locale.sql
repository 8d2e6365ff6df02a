-- +goose Up
-- The language a user reads the dashboard in ('id' Bahasa Indonesia, 'en'
-- English); NULL = follow the browser's Accept-Language.
SET LOCAL ROLE jejak_owner;

ALTER TABLE users ADD COLUMN locale text CHECK (locale IN ('id', 'en'));
